"""The unit of work and audit: the operation runs in the call's unit of work;
on success its audit entry, the run's seal and the idempotency outcome are
written in the same transaction, which commits once (then after-commit hooks)."""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Protocol, cast

from google.protobuf.message import Message
from persona.v1 import options_pb2

from persona_service.kernel import metrics
from persona_service.kernel.data.outages import committed, connection_lost, must_run_again
from persona_service.kernel.data.quota_repository import QuotaRepository
from persona_service.kernel.transport.audit import AuditEntry, AuditLog
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.idempotency import IN_DOUBT_SECONDS
from persona_service.kernel.transport.limits.limiter import GENERATIONS
from persona_service.kernel.transport.stages.call import Call, Stage
from persona_service.kernel.transport.stages.hold import due
from persona_service.kernel.transport.stages.idempotency import replayable
from persona_service.kernel.transport.validation import check_closed_sets

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy import Engine

    from persona_service.kernel.errors import ApiError
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.idempotency import Idempotency
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.runs import Runs

log = logging.getLogger("persona_service.requests")

# Initial-metadata carriers of a successful answer's HTTP status and headers
# (the error path has its own, `x-http-status`); the edge's Lua applies them.
STATUS_CARRIER = "x-persona-status"
HEADER_CARRIER = "x-persona-set-"
REDIRECT_STATUS = 307
# How many times a unary operation runs when PostgreSQL aborts it to break a deadlock or keep a snapshot
# serial (kernel.data.outages.must_run_again), and the longest pause before running it again.
RUNS = 4
RERUN_PAUSE_SECONDS = 0.05


class Commit(Stage):
    """As a stage, the last before a unary operation: runs it (`then`) and
    commits its outcome. Streams call `complete` once their operation ends."""

    def __init__(self, runs: Runs, idempotency: Idempotency, engine: Engine) -> None:
        self.runs = runs
        self.idempotency = idempotency
        self.engine = engine  # the final answer's idempotency record (`finish`), after the commit

    def __call__(self, call: Call) -> object:
        call.reached_operation = True
        before = Answer.of(call.ctx)
        for attempt in range(1, RUNS + 1):
            try:
                due(call)  # the operation's unit of work begins with the caller's hold (the next stage)
                response = cast(Message, self.then(call))  # the last stage before a unary operation: a message
                check_closed_sets(response)
                call.ctx.headers += answer(call.ctx, call.meta, response)
                self.complete(call, call.message, response)
                break
            except Exception as exc:
                # Aborted by PostgreSQL (a deadlock it broke, a snapshot it could not keep): nothing
                # committed, and running the operation again after the other transaction is what a serial
                # order answers; a client never sees it. A durable run has its own recovery (runs.py).
                if call.succeeded or call.run is not None or attempt == RUNS or not must_run_again(exc):
                    raise
                orig = getattr(exc, "orig", exc)
                log.warning("%s aborted by the database (%s); running it again [request_id=%s attempt=%d]",
                            call.meta.path, type(orig).__name__, call.ctx.request_id, attempt)
                metrics.RERUNS.labels(call.meta.path, getattr(orig, "sqlstate", None) or "").inc()
                unit_of_work(call.ctx).close()  # rolls back; the next use begins afresh
                before.restore(call.ctx)
                time.sleep(random.uniform(0, RERUN_PAUSE_SECONDS * attempt))  # noqa: S311 - jitter, not a secret
        if call.ctx.finish is not None:
            response = self.finish(call, response)
        return response

    def complete(self, call: Call, request: Message, response: Message | None) -> None:
        ctx, meta = call.ctx, call.meta
        if meta.audited:
            AuditLog(ctx.work).record(audit_entry(ctx, meta, "success", 200, request=request, response=response))
        if call.run is not None:
            self.runs.seal(unit_of_work(ctx).conn, call.run, "completed")
        if meta.policy.generation:  # the quota's durable count, which rebuilds its Redis counter
            QuotaRepository(unit_of_work(ctx).conn).draw(ctx.caller.org_id, GENERATIONS)
        if call.claim is not None and response is not None:  # a claim is a unary call's: it has its response
            self.idempotency.complete(unit_of_work(ctx).conn, call.claim, response.SerializeToString(), replayable(ctx.headers))
        # A keyless unary write is identified by its transaction's id (a keyed one by its claim's record; a durable
        # run's end by its row, runs.after_outage): one round trip, so that a lost COMMIT's answer can be asked for.
        xid = unit_of_work(ctx).transaction_id() if call.claim is None and call.run is None else None
        try:
            unit_of_work(ctx).commit()
        except Exception as exc:
            # A COMMIT whose connection dropped may have gone through unanswered: settled by what the database says,
            # not guessed. A 503 for a write that committed would have its retry make it twice.
            if not connection_lost(exc) or not self._went_through(call, xid):
                raise
            log.warning("the commit went through unanswered; answered as committed [request_id=%s]", ctx.request_id)
        call.committed_claim, call.claim = call.claim, None
        call.succeeded = True
        for hook in ctx.after_commit:
            try:
                hook()
            except Exception:  # noqa: BLE001 - the change is committed; a hook must not fail the call
                log.exception("after-commit hook failed [request_id=%s]", ctx.request_id)

    def _went_through(self, call: Call, xid: int | None) -> bool:
        """Whether the call's transaction, its COMMIT unanswered, committed: its claim's record says (completed only
        there), else its transaction id does; a durable run settles its own (runs.after_outage)."""
        if call.claim is not None:
            return self.idempotency.went_through(call.claim)
        return xid is not None and committed(self.engine, xid, IN_DOUBT_SECONDS)

    def finish(self, call: Call, response: Message) -> Message:
        """The answer after the commit (RequestContext.finish). An
        Idempotency-Key replays it, not the answer at the commit; if it
        fails, the key records that failure as any other (a 5xx frees it)."""
        assert call.ctx.finish is not None  # the caller calls this only then
        try:
            final: Message = call.ctx.finish(response)
        except Exception:
            call.claim = call.committed_claim
            raise
        if call.committed_claim is not None and final is not response:
            try:
                with self.engine.begin() as conn:
                    self.idempotency.complete(conn, call.committed_claim, final.SerializeToString(),
                                              replayable(call.ctx.headers))
            except Exception:  # noqa: BLE001 - the caller still gets its answer; a replay gets the earlier one
                log.exception("could not record the final answer [request_id=%s]", call.ctx.request_id)
        return final

    def commit_outcome(self, call: Call, err: ApiError) -> None:
        """Commit changes that are part of an error's outcome (e.g. a failed run's record)."""
        ctx = call.ctx
        try:
            if call.run is not None:
                self.runs.seal(unit_of_work(ctx).conn, call.run, "failed")
            unit_of_work(ctx).commit()
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not commit the outcome of %s [request_id=%s]", err.code, ctx.request_id)


class Answer:
    """What an operation adds to its call's answer (headers, status, after-commit hooks), as it was before
    the operation ran: an operation run again starts from it."""

    def __init__(self, headers: int, http_headers: int, status: int | None, hooks: int,
                 finish: Callable[[Message], Message] | None) -> None:
        self.headers, self.http_headers, self.status, self.hooks, self.finish = (
            headers, http_headers, status, hooks, finish)

    @classmethod
    def of(cls, ctx: RequestContext) -> Answer:
        return cls(len(ctx.headers), len(ctx.http_headers), ctx.status, len(ctx.after_commit), ctx.finish)

    def restore(self, ctx: RequestContext) -> None:
        del ctx.headers[self.headers:], ctx.http_headers[self.http_headers:], ctx.after_commit[self.hooks:]
        ctx.status, ctx.finish = self.status, self.finish


class _Redirect(Protocol):
    """A redirect's answer (RESPONSE_KIND_REDIRECT): its `uri` is the Location."""

    uri: str


def answer(ctx: RequestContext, meta: MethodMeta, response: Message) -> list[tuple[str, str]]:
    """The carriers of the HTTP status and headers the RPC answers with: its
    declared response kind, plus what the servicer set with ctx.respond()."""
    status, headers = ctx.status or meta.policy.success_status or None, list(ctx.http_headers)
    if meta.response_kind == options_pb2.RESPONSE_KIND_REDIRECT:
        status = status or REDIRECT_STATUS
        headers.append(("location", cast(_Redirect, response).uri))
    carriers = [(HEADER_CARRIER + name, value) for name, value in headers]
    if status is not None:
        carriers.append((STATUS_CARRIER, str(status)))
    return carriers


def audit_entry(ctx: RequestContext, meta: MethodMeta, outcome: str, status: int, *,
                request: Message | None = None, response: Message | None = None, error: ApiError | None = None,
                action: str | None = None) -> AuditEntry:
    hint = getattr(error, "principal", None)
    return AuditEntry.for_principal(
        ctx.principal or hint,
        action=action or meta.action,
        outcome=outcome,
        status=status,
        request_id=ctx.request_id,
        client_ip=ctx.client_ip,
        resource_type=meta.resource_type,
        resource_id=_resource_id(request, response),
        error_code=error.code if error is not None else "",
        details={"method": meta.path, **({"message": error.message} if error is not None else {}),
                 **({"createdId": ctx.created_id} if ctx.created_id and error is None else {})},
    )


def _resource_id(request: Message | None, response: Message | None) -> str:  # messages with or without an `id`
    for message in (request, response):
        if message is None:
            continue
        if own := _id_of(message):
            return str(own)
        for field in message.DESCRIPTOR.fields:
            if field.message_type is not None and not field.is_repeated and message.HasField(field.name):
                if nested := _id_of(getattr(message, field.name)):
                    return str(nested)
    return ""


def _id_of(message: Message) -> object:
    """A message's `id` (None when its type has none)."""
    fields = message.DESCRIPTOR.fields_by_name
    return getattr(message, fields["id"].name) if "id" in fields else None
