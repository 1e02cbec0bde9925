"""The request pipeline, as one gRPC server interceptor.

For every persona.v1 RPC, in order: request id → authenticate → rate limits
(per organization; per client address when authentication failed) →
authorize against the method's declared policy and the key's IP allowlist →
validate the request from its proto rules → idempotency (writes with an
`Idempotency-Key`) → the servicer, in a unit of work → audit → commit →
response headers. Errors, expected (ApiError) or not (500 `internal_error`,
logged with the request id, nothing leaked), are translated by
`transport.errors`. A new RPC gets all of this by declaring its policy.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, cast

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message
from persona.v1 import options_pb2

from persona_service.kernel import metrics, tracing
from persona_service.kernel.access import authorize
from persona_service.kernel.audit import AuditEntry, AuditLog
from persona_service.kernel.auth import check_client_address
from persona_service.kernel.db.uow import UnitOfWork
from persona_service.kernel.errors import (
    ApiError,
    BadRequest,
    InternalError,
    ServiceUnavailable,
    StoredError,
    Unauthorized,
)
from persona_service.kernel.fair import FairGate, GateTimeout, weight_of
from persona_service.kernel.idempotency import request_hash
from persona_service.kernel.limits.limiter import Admission
from persona_service.kernel.logs import Throttled
from persona_service.kernel.principal import principal_from_json, principal_json
from persona_service.kernel.runs import Outcome, Run, RunOwner, resume_point
from persona_service.kernel.transport import context as request_context
from persona_service.kernel.transport import initial_metadata, sse
from persona_service.kernel.transport.body_keys import HEADER as BODY_KEYS
from persona_service.kernel.transport.body_keys import refuse_unknown_fields
from persona_service.kernel.transport.errors import abort, render_body
from persona_service.kernel.transport.outages import RETRY_AFTER_SECONDS, as_outage
from persona_service.kernel.transport.policy import MethodMeta
from persona_service.kernel.transport.validation import check_closed_sets, validate

if TYPE_CHECKING:
    import contextvars

    from sqlalchemy import Engine

    from persona_service.kernel.app import App
    from persona_service.kernel.idempotency import Claim, Replay

    # What grpcio hands the pipeline per method: handlers over any message type.
    Handler = grpc.RpcMethodHandler[Any, Any]
    # A servicer method: the request (a message, or Undecodable) and the context it was called with.
    Unary = Callable[[Any, grpc.ServicerContext], Message]
    Streaming = Callable[[Any, Any], Iterator[Message]]

log = logging.getLogger("persona_service.requests")
_refusals = Throttled(log)

# Set by the edge's Lua filter on requests that arrived as HTTP/JSON.
EDGE_MARK = "x-persona-edge"
# Set by the edge on a HEAD (answered as the GET, without its body): a raw body need not be produced.
HEAD_MARK = "x-persona-head"
LOG_CARRIER = "x-persona-log"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
# Headers an idempotent replay does not copy from the first response.
_PER_RESPONSE = ("x-request-id", "x-ratelimit-", "ratelimit", "x-service-plan-window-seconds", "retry-after")
# How long an admitted unary call waits for a worker's turn before a 503 with Retry-After.
TURN_WAIT_SECONDS = 10.0


class _Call:
    """Per-call state that the stages share."""

    def __init__(self, ctx: request_context.RequestContext, metadata: dict[str, str]) -> None:
        self.ctx = ctx
        self.metadata = metadata
        self.admission = Admission()
        self.claim: Claim | None = None
        self.committed_claim: Claim | None = None  # the claim once the unit of work committed its outcome
        self.reached_operation = False
        self.succeeded = False
        self.streaming = False  # a streaming RPC has sent its headers
        self.holds_turn = False  # of the unary server's gate
        self.run: Run | None = None  # the durable run this call's operation is (streaming RPCs)


class RequestPipeline(grpc.ServerInterceptor):
    def __init__(self, app: App, methods: dict[str, MethodMeta], engine: Engine | None = None,
                 gate: FairGate | None = None) -> None:
        self.app = app
        # The unary server's workers, taken in turns per organization once a call is authenticated and
        # within its limits (refusals take no turn), so one organization's flood never queues ahead of all.
        self.gate = gate
        self.methods = methods
        # Units of work come from this engine (the stream server has its own pool).
        self.engine = engine if engine is not None else app.engine
        self._trusted = [ipaddress.ip_network(n.strip(), strict=False) for n in app.settings.trusted_proxies if n.strip()]
        self._trusted_cache: dict[str, bool] = {}
        self._edge_secret = app.settings.edge_secret
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}
        self.servicers: dict[str, object] = {}  # by full service name (`revive` calls their methods)

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
                          details: grpc.HandlerCallDetails) -> Handler | None:
        # The wrapped handler of a method is built once (it is the same for every call).
        wrapped = self._wrapped.get(details.method)
        if wrapped is None:
            wrapped = self._wrap(continuation(details), self.methods.get(details.method))
            if wrapped is not None:
                self._wrapped[details.method] = wrapped
        return wrapped

    def _wrap(self, handler: Handler | None, meta: MethodMeta | None) -> Handler | None:
        if handler is None or meta is None:  # not a module's RPC (e.g. gRPC health)
            return handler
        decode = _tolerant(handler.request_deserializer)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, meta),
                request_deserializer=decode,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            # Runs keep frames serialized: they go out as they are (byte streams serialize their own).
            byte_stream = meta.response_kind == options_pb2.RESPONSE_KIND_RAW_BODY
            return grpc.unary_stream_rpc_method_handler(
                (self._byte_stream if byte_stream else self._streaming)(handler.unary_stream, meta),
                request_deserializer=decode,
                response_serializer=_passthrough,
            )
        return handler

    # --- handlers ---------------------------------------------------------------

    def _unary(self, behavior: Unary, meta: MethodMeta) -> Callable[[Any, grpc.ServicerContext], Message]:
        def handle(request: Any, context: grpc.ServicerContext) -> Message:
            call = self._begin(context, meta)
            token = request_context.bind(call.ctx)
            span = _span(call, meta)
            try:
                replay = self._admit(call, request, meta)
                if replay is not None:
                    response = self._replay(call, replay, meta)
                else:
                    call.reached_operation = True
                    response = behavior(request, context)
                    check_closed_sets(response)
                    call.ctx.headers += _answer(call.ctx, meta, response)
                    self._complete(call, meta, request, response)
                    if call.ctx.finish is not None:
                        response = self._finish(call, response)
            except Exception as exc:  # noqa: BLE001 - translated, never leaked
                self._fail(call, context, meta, exc)
            else:
                initial_metadata.attach(context, call.ctx.headers)
                self._log(call.ctx, 200)
                return response
            finally:
                self._end(call, token)
                if span is not None:
                    span.end(*call.ctx.outcome)

        return handle

    def _streaming(self, behavior: Streaming,
                   meta: MethodMeta) -> Callable[[Any, grpc.ServicerContext], Iterator[bytes]]:
        """A streaming call follows a durable run (kernel.runs): its operation
        runs on the run pool, so the client leaving never stops it, and a
        `Last-Event-ID` resumes an earlier run instead of starting one."""

        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[bytes]:
            call = self._begin(context, meta)
            token = request_context.bind(call.ctx)
            run = None
            metrics.OPEN_STREAMS.inc()
            try:
                resume = resume_point(call.metadata.get("last-event-id"))
                self._admit(call, request, meta, stream=True, resuming=resume is not None)
                if resume is not None:
                    call.ctx.uow.close()  # following needs no database
                    frames, outcome = self.app.runs.resume(resume, _run_owner(call), meta.path, context.is_active)
                    run_id = resume.run_id
                else:
                    call.reached_operation = True
                    run = self.app.runs.start(
                        _run_owner(call), meta.path,
                        lambda run: self._produce(call, behavior, request, context, meta, run),
                        weight_of(call.ctx.caller.plan), _revivable(call, request),
                    )
                    run_id = run.id
                    frames, outcome = self.app.runs.follow(run, 0, context.is_active)
                call.ctx.headers.append(("x-run-id", run_id))
                yield from self._relay(call, context, meta, frames, outcome, run_id)
                if resume is not None:
                    call.succeeded = True
                    self._log(call.ctx, 200)
            except Exception as exc:  # noqa: BLE001
                if run is None:
                    self._fail(call, context, meta, exc)
                else:  # the run settled its own outcome; only tell this caller
                    self._abort(call, context, meta, exc)
            finally:
                metrics.OPEN_STREAMS.dec()
                if run is None:
                    self._end(call, token)
                else:
                    request_context.unbind(token)

        return handle

    def _byte_stream(self, behavior: Streaming,
                     meta: MethodMeta) -> Callable[[Any, grpc.ServicerContext], Iterator[bytes]]:
        """A raw-body stream (a download): the servicer's HttpBody messages go
        out as it yields them, each once the previous one was written (grpcio
        waits for each send), so a slow client holds back the reading rather
        than memory filling. Not a durable run: nothing is kept, and a client
        that loses the stream asks again. Headers (ctx.respond) go out with
        the first message; a failure before it is an ordinary error answer."""

        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[bytes]:
            call = self._begin(context, meta)
            token = request_context.bind(call.ctx)
            metrics.OPEN_STREAMS.inc()
            try:
                self._admit(call, request, meta, stream=True)
                call.reached_operation = True
                started = False
                for message in behavior(request, context):
                    if not started:
                        call.ctx.headers += _answer(call.ctx, meta, message)
                        context.send_initial_metadata(tuple(call.ctx.headers))
                        started = True
                    yield message.SerializeToString()
                self._complete(call, meta, request, None)
                self._log(call.ctx, 200)
            except Exception as exc:  # noqa: BLE001 - translated, never leaked
                self._fail(call, context, meta, exc)
            finally:
                metrics.OPEN_STREAMS.dec()
                self._end(call, token)

        return handle

    def _produce(self, call: _Call, behavior: Streaming, request: Message, context: grpc.ServicerContext | _Detached,
                 meta: MethodMeta, run: Run) -> Outcome:
        """The operation of a run, on the run pool: every stage after the
        servicer (audit, commit, failure records, the quota refund) as a
        unary call has them, whether anyone still listens or not."""
        token = request_context.bind(call.ctx)
        call.run = run
        # The operation's span lives on this thread (its SQL and provider calls are its children).
        span = _span(call, meta, **{"run.id": run.id})
        last = None
        try:
            for last in behavior(request, context):
                self.app.runs.emit(run, last)
            self._complete(call, meta, request, last)
            self._log(call.ctx, 200)
            return Outcome("completed")
        except Exception as exc:  # noqa: BLE001 - settled, then told to the followers
            if run.abandoned:  # another process goes on with the run: roll back, settle nothing
                call.ctx.uow.close()
                return Outcome("abandoned")
            return Outcome("failed", self._settle(call, meta, exc))
        finally:
            self._end(call, token)
            if span is not None:
                span.end(*call.ctx.outcome)

    def revive(self, payload: dict) -> Callable[[Run], Outcome]:
        """The operation of a run another process accepted (kernel.runs takes it
        over): the same request, as the same caller, in a unit of work of its
        own. Admission (limits, quota) happened when the run was accepted."""
        meta = self.methods[payload["method"]]
        service, _, name = meta.path.strip("/").rpartition("/")
        behavior = getattr(self.servicers[service], name)
        request = _request_class(meta.path).FromString(base64.b64decode(payload["request"]))
        call = _Call(request_context.RequestContext(
            started=time.perf_counter(), request_id=payload["request_id"], method=meta.path,
            uow=UnitOfWork(self.engine, read_only=not meta.policy.write), client_ip=payload.get("client_ip"),
            traceparent=payload.get("traceparent"), principal=principal_from_json(payload["principal"]),
        ), {})
        call.reached_operation = True
        return lambda run: self._produce(call, behavior, request, _Detached(), meta, run)

    def _relay(self, call: _Call, context: grpc.ServicerContext, meta: MethodMeta, frames: Iterator[tuple[int, bytes]],
               outcome: Callable[[], Outcome | None], run_id: str) -> Iterator[bytes]:
        """Frames to this caller: typed messages to a native gRPC client; to
        the JSON edge, server-sent events with `id: <run>.<seq>` (and
        `event:`), ending with an `end` event (see sse.py)."""
        edge = EDGE_MARK in call.metadata
        started = False
        for seq, frame in frames:
            if not started:
                context.send_initial_metadata(tuple(call.ctx.headers))
                started = True
            yield sse.frame(meta, run_id, seq, frame) if edge else frame
        result = outcome()
        if result is not None and result.status == "handed_over":
            # This process is draining: the stream ends without `end` (the client resumes elsewhere).
            if not edge:
                raise _handed_over()
            return
        failure = result.error if result is not None else None
        if failure is not None and (not started or not edge):
            raise failure  # a plain error response before any frame; a gRPC status after them
        if not started:
            context.send_initial_metadata(tuple(call.ctx.headers))
        if edge and not meta.raw_stream:
            yield sse.end(run_id, result.status if result is not None else "detached")

    # --- stages -----------------------------------------------------------------

    def _begin(self, context: grpc.ServicerContext, meta: MethodMeta) -> _Call:
        metadata = cast(dict[str, str], dict(context.invocation_metadata()))  # the text headers are what is read
        request_id = metadata.get("x-request-id", "")
        if not _REQUEST_ID.match(request_id):
            # A uuid4 as Envoy makes them (one format, whichever door the call came in by);
            # not a cuid2: measured 1.7 µs against 57 µs, on every call without an id.
            request_id = str(uuid.uuid4())
        ctx = request_context.RequestContext(
            started=time.perf_counter(),
            request_id=request_id,
            method=meta.path,
            uow=UnitOfWork(self.engine, read_only=not meta.policy.write),
            client_ip=self._client_ip(context.peer(), metadata),
            traceparent=metadata.get("traceparent"),
        )
        ctx.headers.append(("x-request-id", request_id))
        return _Call(ctx, metadata)

    def _admit(self, call: _Call, request: Message | Undecodable, meta: MethodMeta, stream: bool = False,
               resuming: bool = False) -> Replay | None:
        """Everything before the operation. Returns a stored outcome to replay, or None."""
        ctx, policy = call.ctx, meta.policy
        if policy.anonymous:  # the request proves itself (e.g. a signed URL); no tenant, no tenant limits
            ctx.headers += self.app.limiter.peek_anonymous(ctx.client_ip).headers
            if isinstance(request, Undecodable):
                raise _undecodable()
            refuse_unknown_fields(meta.path, call.metadata.get(BODY_KEYS))
            validate(request)
            return None
        try:
            principal = self.app.authenticator.authenticate(call.metadata.get("authorization"), lambda: ctx.conn)
        except Unauthorized:
            # Failed credentials are limited per client address, and carry the headers too.
            ctx.headers += self.app.limiter.admit_anonymous(ctx.client_ip).headers
            raise
        ctx.principal = principal
        if EDGE_MARK in call.metadata:
            # Who called, for the edge's access log (the Lua filter keeps it there, never sends it on).
            ctx.headers.append((LOG_CARRIER, f"{principal.org_id} {principal.workspace_id} {principal.credential_id}"))
        call.admission = self.app.limiter.admit(
            principal.org_id, self.app.limits.limits(principal, lambda: ctx.conn), cap=policy.endpoint_cap,
            generation=policy.generation, stream=stream, token=ctx.request_id,
            period=self.app.limits.quota_period(principal.org_id, lambda: ctx.conn) if policy.generation else None,
        )
        ctx.headers += call.admission.headers
        check_client_address(principal, ctx.client_ip)
        authorize(principal, scope=policy.scope, roles=policy.roles, platform_admin=policy.platform_admin)
        if self.gate is not None:
            self._take_turn(call, self.gate)
        if isinstance(request, Undecodable):
            raise _undecodable()
        refuse_unknown_fields(meta.path, call.metadata.get(BODY_KEYS))
        if resuming:
            return None  # the request of the run resumed was validated when it started; this body is ignored
        validate(request)
        key = call.metadata.get("idempotency-key")
        if not (policy.write and not stream and key is not None):
            return None
        digest = request_hash(meta.path, request.SerializeToString(deterministic=True))
        call.claim, replay = self.app.idempotency.begin(principal, key, meta.path, digest)
        return replay

    @staticmethod
    def _take_turn(call: _Call, gate: FairGate) -> None:
        principal = call.ctx.caller
        call.ctx.uow.close()  # what authentication read on a cache miss: no connection is held while waiting
        try:
            gate.acquire(principal.org_id, weight_of(principal.plan), TURN_WAIT_SECONDS)
        except GateTimeout:
            err = ServiceUnavailable("The server is busy; retry shortly.", {"retryAfter": RETRY_AFTER_SECONDS})
            err.headers = {"retry-after": str(RETRY_AFTER_SECONDS)}
            raise err from None
        call.holds_turn = True

    def _replay(self, call: _Call, replay: Replay, meta: MethodMeta) -> Message:
        metrics.REPLAYS.inc()
        call.ctx.headers += [*replay.headers.items(), ("idempotent-replayed", "true")]
        if replay.error_body is not None:
            raise StoredError(replay.error_status, replay.error_body, replay.headers)
        return meta.response_class.FromString(replay.response or b"")

    def _complete(self, call: _Call, meta: MethodMeta, request: Message, response: Message | None) -> None:
        ctx = call.ctx
        if meta.audited:
            AuditLog(ctx.conn).record(self._entry(ctx, meta, "success", 200, request=request, response=response))
        if call.run is not None:
            self.app.runs.seal(ctx.conn, call.run, "completed")
        if call.claim is not None and response is not None:  # a claim is a unary call's: it has its response
            self.app.idempotency.complete(ctx.conn, call.claim, response.SerializeToString(), self._replayable(ctx.headers))
        ctx.uow.commit()
        call.committed_claim, call.claim = call.claim, None
        call.succeeded = True
        for hook in ctx.after_commit:
            try:
                hook()
            except Exception:  # noqa: BLE001 - the change is committed; a hook must not fail the call
                log.exception("after-commit hook failed [request_id=%s]", ctx.request_id)

    def _finish(self, call: _Call, response: Message) -> Message:
        """The answer after the commit (RequestContext.finish). An
        Idempotency-Key replays it, not the answer at the commit; if it
        fails, the key records that failure as any other (a 5xx frees it)."""
        assert call.ctx.finish is not None  # the caller calls this only then
        try:
            final = call.ctx.finish(response)
        except Exception:
            call.claim = call.committed_claim
            raise
        if call.committed_claim is not None and final is not response:
            try:
                with self.app.engine.begin() as conn:
                    self.app.idempotency.complete(conn, call.committed_claim, final.SerializeToString(),
                                                  self._replayable(call.ctx.headers))
            except Exception:  # noqa: BLE001 - the caller still gets its answer; a replay gets the earlier one
                log.exception("could not record the final answer [request_id=%s]", call.ctx.request_id)
        return final

    def _fail(self, call: _Call, context: grpc.ServicerContext, meta: MethodMeta, exc: Exception) -> NoReturn:
        err = self._settle(call, meta, exc)
        abort(context, err, call.ctx.headers, json_edge=EDGE_MARK in call.metadata, shape=meta.error_shape)

    def _settle(self, call: _Call, meta: MethodMeta, exc: Exception) -> ApiError:
        """Everything a failure leaves behind (its persisted outcome, the
        rollback, audit and idempotency records, the log line); returns the
        error to answer with."""
        ctx = call.ctx
        err = self._translate(ctx, exc)
        if err.persist and call.reached_operation:
            self._commit_outcome(call, err)
        ctx.uow.close()  # roll back whatever was not committed
        if isinstance(err, StoredError):
            err.headers["idempotent-replayed"] = "true"
        else:
            self._record_failure(call, meta, err)
        self._log(ctx, err.spec.http_status, err.code)
        return err

    def _abort(self, call: _Call, context: grpc.ServicerContext, meta: MethodMeta, exc: Exception) -> NoReturn:
        """Answer an error the run already settled (or one of following it)."""
        err = self._translate(call.ctx, exc)
        abort(context, err, call.ctx.headers, json_edge=EDGE_MARK in call.metadata, shape=meta.error_shape)

    @staticmethod
    def _translate(ctx: request_context.RequestContext, exc: Exception) -> ApiError:
        if isinstance(exc, ApiError):
            return exc
        err = as_outage(exc) or InternalError()
        if isinstance(err, InternalError):
            log.error("unhandled error in %s [request_id=%s]", ctx.method, ctx.request_id, exc_info=exc)
        return err

    def _commit_outcome(self, call: _Call, err: ApiError) -> None:
        """Commit changes that are part of an error's outcome (e.g. a failed run's record)."""
        ctx = call.ctx
        try:
            if call.run is not None:
                self.app.runs.seal(ctx.conn, call.run, "failed")
            ctx.uow.commit()
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not commit the outcome of %s [request_id=%s]", err.code, ctx.request_id)

    def _record_failure(self, call: _Call, meta: MethodMeta, err: ApiError) -> None:
        ctx = call.ctx
        status = err.spec.http_status
        security = err.code in ("unauthorized", "forbidden")
        # Each on its own: an audit entry PostgreSQL refused (it is away) must not
        # keep the Idempotency-Key claimed (its release is retried until it is back).
        try:
            if call.claim is not None:
                if status < 500:
                    headers = self._replayable(ctx.headers + list(err.headers.items()))
                    self.app.idempotency.fail(call.claim, status, render_body(err), headers)
                else:
                    self.app.idempotency.release(call.claim)
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not record the failure's idempotency outcome [request_id=%s]", ctx.request_id)
        try:
            if security or (call.reached_operation and meta.audited):
                action = "auth.authenticate" if err.code == "unauthorized" else meta.action
                entry = self._entry(ctx, meta, "failure", status, error=err, action=action)
                self.app.audit(self.app.failed_auth.admit(entry) if err.code == "unauthorized" else [entry])
        except Exception:  # noqa: BLE001 - the caller still gets its error
            log.exception("could not record the failure [request_id=%s]", ctx.request_id)

    def _end(self, call: _Call, token: contextvars.Token) -> None:
        if call.holds_turn and self.gate is not None:
            self.gate.release()
        # A generation that did not succeed gives its quota unit back.
        self.app.limiter.release(call.admission, refund=not call.succeeded)
        call.ctx.uow.close()
        request_context.unbind(token)

    # --- helpers ------------------------------------------------------------------

    @staticmethod
    def _entry(ctx: request_context.RequestContext, meta: MethodMeta, outcome: str, status: int, *,
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
            details={"method": meta.path, **({"message": error.message} if error is not None else {})},
        )

    @staticmethod
    def _replayable(headers: list[tuple[str, str]]) -> dict[str, str]:
        return {k: v for k, v in headers if not k.startswith(_PER_RESPONSE)}

    def _log(self, ctx: request_context.RequestContext, status: int, code: str = "") -> None:
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
            "%s status=%s code=%s request_id=%s org=%s credential=%s" + held_back,
            ctx.method, status, code or "-", ctx.request_id,
            principal.org_id if principal else "-", principal.credential_id if principal else "-",
            extra={"request_id": ctx.request_id, "trace_id": tracing.trace_id_of(ctx.traceparent), "rpc": ctx.method,
                   "status": status, "code": code or None,
                   "org": principal.org_id if principal else None,
                   "workspace": principal.workspace_id if principal else None,
                   "principal": principal.credential_id if principal else None,
                   "latency_ms": round(seconds * 1000, 2)},
        )

    def _client_ip(self, peer: str, metadata: dict[str, str]) -> str | None:
        """The client address: the peer, or, when the call comes from the edge
        (a trusted peer that also proves the edge secret), the downstream
        address Envoy reports (`x-envoy-client-address`). Any other local
        process sending that header is ignored."""
        address = _peer_address(peer)
        edge_address = metadata.get("x-envoy-client-address")
        if (edge_address and address is not None and self._edge_secret
                and hmac.compare_digest(metadata.get("x-persona-edge-secret", ""), self._edge_secret)
                and self._is_trusted(address)):
            return _host_of(edge_address)
        return address

    def _is_trusted(self, address: str) -> bool:
        # Peers are few (the edge, local services): remember each verdict.
        trusted = self._trusted_cache.get(address)
        if trusted is None:
            try:
                trusted = any(ipaddress.ip_address(address) in net for net in self._trusted)
            except ValueError:
                trusted = False
            if len(self._trusted_cache) < 1024:
                self._trusted_cache[address] = trusted
        return trusted


def _revivable(call: _Call, request: Message) -> dict:
    """What another process needs to run a run's operation (`revive`): never a credential."""
    ctx = call.ctx
    return {"request": base64.b64encode(request.SerializeToString()).decode(), "request_id": ctx.request_id,
            "client_ip": ctx.client_ip, "traceparent": ctx.traceparent, "principal": principal_json(ctx.caller)}


def _request_class(path: str) -> type[Message]:
    method = descriptor_pool.Default().FindMethodByName(path.strip("/").replace("/", "."))
    return message_factory.GetMessageClass(method.input_type)


class _Detached:
    """The gRPC context of a run taken over from another process: nobody's call."""

    @staticmethod
    def is_active() -> bool:
        return True

    @staticmethod
    def invocation_metadata() -> tuple:
        return ()


def _handed_over() -> ServiceUnavailable:
    err = ServiceUnavailable("This server is restarting; resume the stream with `Last-Event-ID`.",
                             {"retryAfter": RETRY_AFTER_SECONDS})
    err.headers = {"retry-after": str(RETRY_AFTER_SECONDS)}
    return err


def _run_owner(call: _Call) -> RunOwner:
    caller = call.ctx.caller
    return RunOwner(caller.org_id, caller.workspace_id)


def _span(call: _Call, meta: MethodMeta, **attributes: str) -> tracing.ServerSpan | None:
    """The RPC's span (None unless traces are exported), current on this thread until it ends."""
    if not tracing.enabled():
        return None  # the common case: nothing built per request
    return tracing.server_span(meta.path, call.ctx.traceparent, **{
        "rpc.system": "grpc", "rpc.method": meta.path, "request.id": call.ctx.request_id, **attributes})


# Initial-metadata carriers of a successful answer's HTTP status and headers
# (the error path has its own, `x-http-status`); the edge's Lua applies them.
STATUS_CARRIER = "x-persona-status"
HEADER_CARRIER = "x-persona-set-"
REDIRECT_STATUS = 307


def _answer(ctx: request_context.RequestContext, meta: MethodMeta, response: Any) -> list[tuple[str, str]]:
    """The carriers of the HTTP status and headers the RPC answers with: its
    declared response kind, plus what the servicer set with ctx.respond()."""
    status, headers = ctx.status or meta.policy.success_status or None, list(ctx.http_headers)
    if meta.response_kind == options_pb2.RESPONSE_KIND_REDIRECT:
        status = status or REDIRECT_STATUS
        headers.append(("location", response.uri))
    carriers = [(HEADER_CARRIER + name, value) for name, value in headers]
    if status is not None:
        carriers.append((STATUS_CARRIER, str(status)))
    return carriers


def _undecodable() -> BadRequest:
    return BadRequest(
        "The request could not be decoded: JSON nested deeper than 32 levels, or not a valid message.",
        {"reason": "undecodable"},
    )


class Undecodable:
    """Stands in for a request the deserializer refused (e.g. protobuf's
    nesting limit of 100, which deeply nested JSON objects reach at ~33
    levels), so the pipeline answers 400 instead of gRPC's bare INTERNAL."""


def _passthrough(frame: bytes) -> bytes:
    return frame


def _tolerant(deserialize: Callable[[bytes], Message] | None) -> Callable[[bytes], Message | Undecodable] | None:
    if deserialize is None:
        return None

    def decode(data: bytes) -> Message | Undecodable:
        try:
            return deserialize(data)
        except Exception:  # noqa: BLE001 - any undecodable body is the caller's error
            return Undecodable()

    return decode


def _resource_id(request: Any, response: Any) -> str:  # messages with or without an `id`
    for message in (request, response):
        if message is None:
            continue
        if "id" in message.DESCRIPTOR.fields_by_name and message.id:
            return message.id
        for field in message.DESCRIPTOR.fields:
            if field.message_type is not None and not field.is_repeated and message.HasField(field.name):
                nested = getattr(message, field.name)
                if "id" in nested.DESCRIPTOR.fields_by_name and nested.id:
                    return nested.id
    return ""


def _host_of(address: str) -> str:
    """"1.2.3.4:5", "[::1]:5" or a bare address → the host part."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    if address.count(":") == 1:
        return address.split(":", 1)[0]
    return address


def _peer_address(peer: str) -> str | None:
    # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555", "unix:/path"
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None
