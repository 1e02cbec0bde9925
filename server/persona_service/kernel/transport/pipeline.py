"""The request pipeline, as one gRPC server interceptor composing ordered stages.

For every persona.v1 RPC (see `stages`, one module each): request id and
client address → authenticate → rate limits (per organization; per client
address when authentication failed) → authorize against the method's
declared policy and the key's IP allowlist → validate the request from its proto rules → idempotency (writes with an
`Idempotency-Key`) → the servicer, in a unit of work (a write's begins by holding the caller's membership:
stages.hold) → audit → commit →
response headers; a streaming call with `Last-Event-ID` resumes its run
instead. Errors, expected (ApiError) or not (500 `internal_error`, logged
with the request id, nothing leaked), are translated by `stages.outcome`.
A new RPC gets all of this by declaring its policy.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, cast

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message
from persona.v1 import options_pb2

from persona_service.kernel import metrics
from persona_service.kernel.data.outages import connection_lost
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.errors import ApiError, ServiceUnavailable
from persona_service.kernel.json_values import JSONObject, as_object
from persona_service.kernel.json_values import items as json_items
from persona_service.kernel.principal import principal_from_json, principal_json
from persona_service.kernel.transport import context as request_context
from persona_service.kernel.transport import initial_metadata, sse
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.convert import text_metadata
from persona_service.kernel.transport.fair import FairExecutor, Turn, turn_of, weight_of
from persona_service.kernel.transport.limits.limiter import Admission
from persona_service.kernel.transport.outages import RETRY_AFTER_SECONDS
from persona_service.kernel.transport.policy import MethodMeta
from persona_service.kernel.transport.runs import Batch, Outcome, Run, RunAbandoned, RunLost, RunSteps, resume_point
from persona_service.kernel.transport.stages import Kind, build, compose
from persona_service.kernel.transport.stages.call import EDGE_MARK as EDGE_MARK
from persona_service.kernel.transport.stages.call import HEAD_MARK as HEAD_MARK
from persona_service.kernel.transport.stages.call import Call, Next
from persona_service.kernel.transport.stages.client_address import ClientAddress
from persona_service.kernel.transport.stages.commit import Commit, answer
from persona_service.kernel.transport.stages.hold import due, hold
from persona_service.kernel.transport.stages.idempotency import RUN_HEADER
from persona_service.kernel.transport.stages.identity import request_id, span
from persona_service.kernel.transport.stages.outcome import Outcomes, log_outcome
from persona_service.kernel.transport.stages.replica import route
from persona_service.kernel.transport.stages.resume import Following, run_owner
from persona_service.kernel.transport.stages.validate import Undecodable

if TYPE_CHECKING:

    from sqlalchemy import Engine

    from persona_service.kernel.transport.grpc_handlers import Handler
    from persona_service.kernel.transport.host import PipelineHost

    # A servicer method: the request (a message of its method's type: `KnownFields` refused an Undecodable) and
    # its call's RequestContext, which the pipeline hands it in place of gRPC's context (grpcio registered the
    # method by name).
    Unary = Callable[[Message, request_context.RequestContext], Message]
    # A streaming servicer method: yields its progress frames, returns its result frames (`_progress`).
    Streaming = Callable[[Message, request_context.RequestContext], Iterator[Message]]


class RequestPipeline(grpc.ServerInterceptor):
    def __init__(self, app: PipelineHost, methods: dict[str, MethodMeta], engine: Engine | None = None,
                 executor: FairExecutor | None = None) -> None:
        self.app = app
        # The unary server's executor: calls wait for its workers in turns per organization, classified by
        # credential at arrival (what authentication found for it before), so one organization's flood never
        # queues ahead of all.
        self.executor = executor
        self.methods = methods
        # Units of work come from this engine (the stream server has its own pool).
        self.engine = engine if engine is not None else app.engine
        self._client_ip = ClientAddress(app.settings.trusted_proxies, app.settings.edge_secret)
        self.commit = Commit(app.runs, app.idempotency, app.engine)
        self.outcomes = Outcomes(app, self.commit)
        self._wrapped: dict[str, Handler] = {}
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
                self._unary(cast("Unary", handler.unary_unary), meta),
                request_deserializer=decode,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            # Runs keep frames serialized: they go out as they are (byte streams serialize their own).
            byte_stream = meta.response_kind == options_pb2.RESPONSE_KIND_RAW_BODY
            return grpc.unary_stream_rpc_method_handler(
                (self._byte_stream if byte_stream else self._streaming)(cast("Streaming", handler.unary_stream), meta),
                request_deserializer=decode,
                response_serializer=_passthrough,
            )
        return handler

    def _chain(self, meta: MethodMeta, kind: Kind, operation: Next) -> Next:
        """The method's stages, composed once, ending in its operation."""
        return compose(build(self.app, meta, kind, self.executor, self.commit), operation)

    # --- handlers ---------------------------------------------------------------

    def _unary(self, behavior: Unary,
               meta: MethodMeta) -> Callable[[Message | Undecodable, grpc.ServicerContext], Message]:
        chain = self._chain(meta, "unary", lambda call: behavior(call.message, call.ctx))

        def handle(request: Message | Undecodable, context: grpc.ServicerContext) -> Message:
            call = self._begin(context, meta, request)
            rpc_span = span(call)
            try:
                response = chain(call)
            except Exception as exc:  # noqa: BLE001 - translated, never leaked
                self.outcomes.fail(call, context, exc)
            else:
                initial_metadata.attach(context, call.ctx.headers)
                log_outcome(call.ctx, 200)
                return cast(Message, response)
            finally:
                self.outcomes.end(call)
                if rpc_span is not None:
                    rpc_span.end(*call.ctx.outcome)

        return handle

    def _streaming(self, behavior: Streaming,
                   meta: MethodMeta) -> Callable[[Message | Undecodable, grpc.ServicerContext], Iterator[bytes]]:
        """A streaming call follows a durable run (kernel.transport.runs): its operation
        runs on the run pool, so the client leaving never stops it, and a
        `Last-Event-ID` resumes an earlier run instead of starting one (the
        resume stage)."""

        def start(call: Call) -> Following:
            call.reached_operation = True
            assert call.context is not None  # a caller's call
            request, context = call.message, call.context
            # An Idempotency-Key's claim completes with the run's acceptance, naming the run its replays follow
            # (stages.idempotency.StreamIdempotency); then no failure of this call releases it.
            claim, call.claim = call.claim, None
            also = None if claim is None else (
                lambda conn, run_id: self.app.idempotency.complete(conn, claim, b"", {RUN_HEADER: run_id}))
            key = None if claim is None else claim.key  # its frames are saved with the key when it ends
            try:
                if self.app.runs.runs_here:
                    run = self.app.runs.start(
                        run_owner(call), meta.path,
                        lambda run: self._produce(call, behavior, request, meta, run),
                        weight_of(call.ctx.caller.plan), _revivable(call, request), also, key,
                    )
                else:  # a runner runs it (process.runner), and ends the call's admission with it
                    run = self.app.runs.submit(run_owner(call), meta.path, weight_of(call.ctx.caller.plan),
                                               {**_revivable(call, request), "admission": asdict(call.admission)}, also,
                                               key)
                    unit_of_work(call.ctx).close()  # following needs no database
                    call.admission = Admission()
            except Exception:
                call.claim = claim  # not accepted: the failure releases it
                raise
            frames, outcome = self.app.runs.follow(run, 0, context.is_active)
            return Following(run, frames, outcome, run.id)

        chain = self._chain(meta, "stream", start)

        def handle(request: Message | Undecodable, context: grpc.ServicerContext) -> Iterator[bytes]:
            call = self._begin(context, meta, request)
            run = None
            metrics.OPEN_STREAMS.inc()
            try:
                call.resume = resume_point(call.metadata.get("last-event-id"))
                following = cast(Following, chain(call))  # the run it started, or the one it resumed
                run = following.run
                call.ctx.headers.append(("x-run-id", following.run_id))
                yield from self._relay(call, context, meta, following.frames, following.outcome, following.run_id)
                if run is None:  # resumed
                    call.succeeded = True
                    log_outcome(call.ctx, 200)
            except Exception as exc:  # noqa: BLE001
                if run is None:
                    self.outcomes.fail(call, context, exc)
                else:  # the run settled its own outcome; only tell this caller
                    self.outcomes.abort(call, context, exc)
            finally:
                metrics.OPEN_STREAMS.dec()
                if run is None:
                    self.outcomes.end(call)

        return handle

    def _byte_stream(self, behavior: Streaming,
                     meta: MethodMeta) -> Callable[[Message | Undecodable, grpc.ServicerContext], Iterator[bytes]]:
        """A raw-body stream (a download): the servicer's HttpBody messages go
        out as it yields them, each once the previous one was written (grpcio
        waits for each send), so a slow client holds back the reading rather
        than memory filling. Not a durable run: nothing is kept, and a client
        that loses the stream asks again. Headers (ctx.respond) go out with
        the first message; a failure before it is an ordinary error answer."""

        def operation(call: Call) -> Iterator[Message]:
            call.reached_operation = True
            return behavior(call.message, call.ctx)

        chain = self._chain(meta, "bytes", operation)

        def handle(request: Message | Undecodable, context: grpc.ServicerContext) -> Iterator[bytes]:
            call = self._begin(context, meta, request)
            metrics.OPEN_STREAMS.inc()
            try:
                started = False
                for message in cast("Iterator[Message]", chain(call)):  # the operation's messages
                    if not started:
                        call.ctx.headers += answer(call.ctx, meta, message)
                        context.send_initial_metadata(tuple(call.ctx.headers))
                        started = True
                    yield message.SerializeToString()
                self.commit.complete(call, call.message, None)
                log_outcome(call.ctx, 200)
            except Exception as exc:  # noqa: BLE001 - translated, never leaked
                self.outcomes.fail(call, context, exc)
            finally:
                metrics.OPEN_STREAMS.dec()
                self.outcomes.end(call)

        return handle

    def _produce(self, call: Call, behavior: Streaming, request: Message, meta: MethodMeta, run: Run) -> Outcome:
        """The operation of a run, on the run pool: every stage after the
        servicer (audit, commit, failure records, the quota refund) as a
        unary call has them, whether anyone still listens or not."""
        call.run = run
        call.ctx.run = RunSteps(run)
        # The operation's span lives on this thread (its SQL and provider calls are its children).
        run_span = span(call, **{"run.id": run.id})
        results: list[Message] = []
        turn = turn_of(call.ctx.principal)  # each frame's serialization, in the caller's turn of the CPU
        try:
            due(call)
            hold(self.app.authenticator, call)  # a write's run begins with the caller's hold (stages.hold)
            results = self._progress(run, behavior(request, call.ctx), turn)
            self.commit.complete(call, request, results[0] if results else None)
            self._emit_results(run, results, turn)
            log_outcome(call.ctx, 200)
            return Outcome("completed")
        except RunLost:  # it cannot go on from what its clients saw: nothing of it commits
            unit_of_work(call.ctx).close()
            return Outcome("lost")
        except Exception as exc:  # noqa: BLE001 - settled, then told to the followers
            if run.abandoned:  # another process goes on with the run: roll back, settle nothing
                unit_of_work(call.ctx).close()
                call.continues_elsewhere = True
                return Outcome("abandoned")
            if connection_lost(exc):  # a database restart: the run goes on once it is back (kernel.transport.runs)
                unit_of_work(call.ctx).close()
                resumed = self.app.runs.after_outage(run)
                if resumed is not None:
                    call.continues_elsewhere = True
                    if resumed.status == "completed":  # the commit went through before the connection dropped
                        self._emit_results(run, results, turn)
                    return resumed
            err = self.outcomes.settle(call, exc)
            if not isinstance(exc, ApiError) and run.frames:  # the servicers frame their own (ApiError) failures
                self._emit_error(run, meta, err, turn)
            return Outcome("failed", err)
        finally:
            self.outcomes.end(call)
            if run_span is not None:
                run_span.end(*call.ctx.outcome)

    def _progress(self, run: Run, operation: Iterator[Message], turn: Turn) -> list[Message]:
        """Emits the frames a streaming servicer yields (progress) and returns the ones it returns: its result
        (a message or a list of them: the persona, the stored reply), which report what the run's unit of work
        writes and so go out only once it committed (`_emit_results`): a client reading the resource a frame
        names finds it."""
        while True:
            try:
                frame = next(operation)
            except StopIteration as done:
                result = done.value
                return [] if result is None else [result] if isinstance(result, Message) else list(result)
            self.app.runs.emit(run, frame, turn=turn)

    def _emit_results(self, run: Run, results: list[Message], turn: Turn) -> None:
        for frame in results:
            self.app.runs.emit(run, frame, turn=turn, committed=True)

    def _emit_error(self, run: Run, meta: MethodMeta, err: ApiError, turn: Turn) -> None:
        """The in-band `error` event (sse.error_frame) of a failure after the stream's first frame."""
        frame = sse.error_frame(meta, err)
        if frame is None:
            return
        try:
            self.app.runs.emit(run, frame, turn=turn)
        except RunAbandoned:
            pass  # another process goes on with the run

    def revive(self, payload: JSONObject) -> Callable[[Run], Outcome]:
        """The operation of a run another process accepted (kernel.transport.runs takes it
        over): the same request, as the same caller, in a unit of work of its
        own. Admission (limits, quota) happened when the run was accepted.
        `payload` is what `_revivable` wrote (and the run's method and
        admission): a KeyError or TypeError on a row it did not write."""
        meta = self.methods[str(payload["method"])]
        service, _, name = meta.path.strip("/").rpartition("/")
        behavior = getattr(self.servicers[service], name)
        request = _request_class(meta.path).FromString(base64.b64decode(str(payload["request"])))
        principal = as_object(payload["principal"])
        if principal is None:
            raise TypeError("a run's principal is a JSON object")
        call = Call(request_context.RequestContext(
            started=time.perf_counter(), request_id=str(payload["request_id"]), method=meta.path,
            uow=UnitOfWork(self.engine, read_only=not meta.policy.write), client_ip=_optional(payload, "client_ip"),
            traceparent=_optional(payload, "traceparent"), principal=principal_from_json(principal),
        ), {}, meta, request)
        call.reached_operation = True
        route(self.app.replicas, call)
        kept = as_object(payload.get("admission"))
        if kept is not None:  # the concurrency slots its accepting server took: released when it ends
            call.admission = Admission(slot_keys=tuple(str(key) for key in json_items(kept.get("slot_keys"))),
                                       refund_key=str(kept["refund_key"]), token=str(kept["token"]))
        return lambda run: self._produce(call, behavior, request, meta, run)

    def _relay(self, call: Call, context: grpc.ServicerContext, meta: MethodMeta, frames: Iterator[Batch],
               outcome: Callable[[], Outcome | None], run_id: str) -> Iterator[bytes]:
        """Frames to this caller: typed messages to a native gRPC client; to
        the JSON edge, server-sent events with `id: <run>.<seq>` (and
        `event:`), every batch of frames in one message, ending with an `end`
        event (see sse.py)."""
        edge = EDGE_MARK in call.metadata
        started = False
        for batch in frames:
            if not batch:  # a keep-alive (kernel.transport.runs.KEEP_ALIVE_SECONDS): a comment, once the stream has begun
                if edge and started:
                    yield sse.keep_alive()
                continue
            if not started:
                context.send_initial_metadata(tuple(call.ctx.headers))
                started = True
            if edge:
                yield sse.frames(meta, run_id, batch)
            else:
                yield from (frame for _seq, frame in batch)
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

    def _begin(self, context: grpc.ServicerContext, meta: MethodMeta, request: Message | Undecodable) -> Call:
        """The call: its request identity and client address (before any other stage)."""
        metadata = text_metadata(context)
        rid = request_id(metadata)
        ctx = request_context.RequestContext(
            started=time.perf_counter(),
            request_id=rid,
            method=meta.path,
            uow=UnitOfWork(self.engine, read_only=not meta.policy.write),
            client_ip=self._client_ip(context.peer(), metadata),
            traceparent=metadata.get("traceparent"),
            metadata=metadata,
        )
        ctx.headers.append(("x-request-id", rid))
        return Call(ctx, metadata, meta, request, context)


def _optional(payload: JSONObject, key: str) -> str | None:
    value = payload.get(key)
    return None if value is None else str(value)


def _revivable(call: Call, request: Message) -> JSONObject:
    """What another process needs to run a run's operation (`revive`): never a credential."""
    ctx = call.ctx
    return {"request": base64.b64encode(request.SerializeToString()).decode(), "request_id": ctx.request_id,
            "client_ip": ctx.client_ip, "traceparent": ctx.traceparent, "principal": principal_json(ctx.caller)}


def _request_class(path: str) -> type[Message]:
    method = descriptor_pool.Default().FindMethodByName(path.strip("/").replace("/", "."))
    return message_factory.GetMessageClass(method.input_type)


def _handed_over() -> ServiceUnavailable:
    err = ServiceUnavailable("This server is restarting; resume the stream with `Last-Event-ID`.",
                             {"retryAfter": RETRY_AFTER_SECONDS})
    err.headers = {"retry-after": str(RETRY_AFTER_SECONDS)}
    return err


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
