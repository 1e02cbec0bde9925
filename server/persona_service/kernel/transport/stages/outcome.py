"""The outcome of a call, whichever stage ended it: errors translated
through the one catalogue (an unexpected one is a logged 500 that leaks
nothing), what a failure leaves behind (rollback, audit and idempotency
records), the log line and metrics, and what every call gives back at its
end (its quota unit when it did not succeed, its connection)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, NoReturn

from persona_service.kernel import metrics, tracing
from persona_service.kernel.data.unique import conflict_of, gone_reference
from persona_service.kernel.errors import ApiError, InternalError, StoredError
from persona_service.kernel.logs import Throttled
from persona_service.kernel.transport import context as request_context
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.errors import abort, render_body
from persona_service.kernel.transport.outages import as_outage
from persona_service.kernel.transport.stages.call import EDGE_MARK, Call
from persona_service.kernel.transport.stages.commit import audit_entry
from persona_service.kernel.transport.stages.idempotency import replayable

if TYPE_CHECKING:
    import grpc

    from persona_service.kernel.transport.host import PipelineHost
    from persona_service.kernel.transport.stages.commit import Commit

log = logging.getLogger("persona_service.requests")
_refusals = Throttled(log)


class Outcomes:
    def __init__(self, app: PipelineHost, commit: Commit) -> None:
        self.app = app
        self.commit = commit

    def fail(self, call: Call, context: grpc.ServicerContext, exc: Exception) -> NoReturn:
        err = self.settle(call, exc)
        abort(context, err, call.ctx.headers, json_edge=EDGE_MARK in call.metadata, shape=call.meta.error_shape)

    def settle(self, call: Call, exc: Exception) -> ApiError:
        """Everything a failure leaves behind (its persisted outcome, the
        rollback, audit and idempotency records, the log line); returns the
        error to answer with."""
        ctx = call.ctx
        err = translate(ctx, exc)
        if err.persist and call.reached_operation:
            self.commit.commit_outcome(call, err)
        unit_of_work(ctx).close()  # roll back whatever was not committed
        if isinstance(err, StoredError):
            err.headers["idempotent-replayed"] = "true"
        else:
            self._record_failure(call, err)
        log_outcome(ctx, err.spec.http_status, err.code, err.log_cause())
        return err

    @staticmethod
    def abort(call: Call, context: grpc.ServicerContext, exc: Exception) -> NoReturn:
        """Answer an error the run already settled (or one of following it)."""
        err = translate(call.ctx, exc)
        abort(context, err, call.ctx.headers, json_edge=EDGE_MARK in call.metadata, shape=call.meta.error_shape)

    def _record_failure(self, call: Call, err: ApiError) -> None:
        ctx, meta = call.ctx, call.meta
        status = err.spec.http_status
        security = err.code in ("unauthorized", "forbidden")
        # Each on its own: an audit entry PostgreSQL refused (it is away) must not
        # keep the Idempotency-Key claimed (its release is retried until it is back).
        try:
            if call.claim is not None:
                # Only what the operation committed is an outcome a retry cannot change (kernel.transport.idempotency).
                if err.persist and call.reached_operation and status < 500:
                    headers = replayable(ctx.headers + list(err.headers.items()))
                    self.app.idempotency.fail(call.claim, status, render_body(err), headers)
                else:
                    self.app.idempotency.release(call.claim)
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not record the failure's idempotency outcome [request_id=%s]", ctx.request_id)
        try:
            if security or (call.reached_operation and meta.audited):
                action = "auth.authenticate" if err.code == "unauthorized" else meta.action
                entry = audit_entry(ctx, meta, "failure", status, error=err, action=action)
                self.app.audit(self.app.failed_auth.admit(entry) if err.code == "unauthorized" else [entry])
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not record the failure [request_id=%s]", ctx.request_id)

    def end(self, call: Call) -> None:
        # A generation that did not succeed gives its quota unit back.
        self.app.limiter.release(call.admission, refund=not (call.succeeded or call.continues_elsewhere))
        unit_of_work(call.ctx).close()


def translate(ctx: request_context.RequestContext, exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    err = as_outage(exc) or conflict_of(exc) or gone_reference(exc) or InternalError()
    if isinstance(err, InternalError):
        log.error("unhandled error in %s [request_id=%s]", ctx.method, ctx.request_id, exc_info=exc)
    return err


def log_outcome(ctx: request_context.RequestContext, status: int, code: str = "", cause: str = "") -> None:
    ctx.outcome = (status, code)
    seconds = time.perf_counter() - ctx.started
    metrics.observe_request(ctx.method, status, code, seconds)
    # Envoy's access log has every request with its id; the server logs
    # failures at INFO and successes at DEBUG (a log line costs throughput).
    if status < 400 and not log.isEnabledFor(logging.DEBUG):
        return
    principal = ctx.principal
    # A flood of refusals logs one line per organization (or address) and code every 10 s.
    held_back = _refusals.due(f"{principal.org_id if principal else ctx.client_ip}:{code}") if status == 429 else ""
    if held_back is None:
        return
    log.log(
        logging.DEBUG if status < 400 else logging.INFO,
        "%s status=%s code=%s request_id=%s org=%s credential=%s" + held_back + (" cause=%s" if cause else ""),
        ctx.method, status, code or "-", ctx.request_id,
        principal.org_id if principal else "-", principal.credential_id if principal else "-",
        *((cause,) if cause else ()),
        extra={"request_id": ctx.request_id, "trace_id": tracing.trace_id_of(ctx.traceparent), "rpc": ctx.method,
               "status": status, "code": code or None, "cause": cause or None,
               "org": principal.org_id if principal else None,
               "workspace": principal.workspace_id if principal else None,
               "principal": principal.credential_id if principal else None,
               "latency_ms": round(seconds * 1000, 2)},
    )
