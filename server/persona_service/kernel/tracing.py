"""OpenTelemetry traces, exported over OTLP/HTTP when PERSONA_OTLP_ENDPOINT
is set (nothing is recorded otherwise: the request path pays one check).

A JSON call's W3C `traceparent` reaches the server through Envoy (it
forwards the header as gRPC metadata); the RPC's span continues that trace,
and the spans opened under it are its children: every SQL statement
(SQLAlchemy's cursor events), every Redis command, every model-provider attempt. Webhook
workers trace each delivery attempt. The trace id is also in the server's
log lines and, through Envoy, in the access log and the `x-trace-id` answer
header, whether or not traces are exported."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import Connection
from sqlalchemy.engine import ExceptionContext

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from sqlalchemy import Engine

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")
_tracer: Tracer | None = None


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a valid W3C `traceparent` (all-zero ids are invalid)."""
    found = _TRACEPARENT.match((traceparent or "").strip().lower())
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(1)


def configure(service: str, endpoint: str, engines: Sequence[Engine] = ()) -> bool:
    """Export this process's spans to `endpoint` (e.g. http://collector:4318); False when unset."""
    global _tracer
    if not endpoint:
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    trace.set_tracer_provider(provider)
    RedisInstrumentor().instrument(tracer_provider=provider)
    _tracer = tracer = trace.get_tracer("persona_service")
    for engine in engines:
        _trace_sql(engine, tracer)
    return True


def _trace_sql(engine: Engine, tracer: Tracer) -> None:
    """A client span per SQL statement, from SQLAlchemy's cursor events
    (opentelemetry-instrumentation-sqlalchemy declares no support for
    SQLAlchemy 2.1 and needs greenlet for its asyncio hooks)."""
    from opentelemetry import trace
    from sqlalchemy import event

    @event.listens_for(engine, "before_cursor_execute")
    def _start(conn: Connection, cursor: object, statement: str, parameters: object, context: object,
               executemany: bool) -> None:
        verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"
        span = tracer.start_span(verb, kind=trace.SpanKind.CLIENT, attributes={
            "db.system": "postgresql", "db.statement": statement[:2000]})
        conn.info.setdefault("persona_spans", []).append(span)

    @event.listens_for(engine, "after_cursor_execute")
    def _end(conn: Connection, cursor: object, statement: str, parameters: object, context: object,
             executemany: bool) -> None:
        spans = conn.info.get("persona_spans")
        if spans:
            spans.pop().end()

    @event.listens_for(engine, "handle_error")
    def _failed(exception_context: ExceptionContext) -> None:
        conn = exception_context.connection
        spans = conn.info.get("persona_spans") if conn is not None else None
        if spans:
            span = spans.pop()
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exception_context.original_exception).__name__))
            span.end()


def shutdown() -> None:
    """Flush what is buffered (a process that stops)."""
    if _tracer is not None:
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if hasattr(provider, "shutdown"):
            provider.shutdown()


def enabled() -> bool:
    return _tracer is not None


class ServerSpan:
    """An RPC's span, current on the calling thread until `end`."""

    def __init__(self, name: str, traceparent: str | None, attributes: Mapping[str, SpanValue], tracer: Tracer):
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent} if traceparent else {})
        self.span = tracer.start_span(name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes)
        self._token = context.attach(trace.set_span_in_context(self.span, parent))

    def end(self, status: int, code: str) -> None:
        from opentelemetry import context, trace

        self.span.set_attribute("http.response.status_code", status)
        if code:
            self.span.set_attribute("error.type", code)
        if status >= 500:
            self.span.set_status(trace.Status(trace.StatusCode.ERROR, code))
        self.span.end()
        context.detach(self._token)


def server_span(name: str, traceparent: str | None, **attributes: SpanValue) -> ServerSpan | None:
    return ServerSpan(name, traceparent, attributes, _tracer) if _tracer is not None else None


# What an OpenTelemetry attribute holds (or a sequence of them, which no caller sets).
SpanValue = str | bool | int | float


class OpenSpan(Protocol):
    """What a caller does with the span `span` opened (opentelemetry.trace.Span's method of that name)."""

    def set_attribute(self, key: str, value: SpanValue) -> None: ...


@contextmanager
def span(name: str, **attributes: SpanValue) -> Iterator[OpenSpan | None]:
    """A child span of whatever is current (none when tracing is off)."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current
