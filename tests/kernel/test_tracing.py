"""OpenTelemetry through the real stack: a JSON call's `traceparent` is
continued by the server's RPC span, whose children are its SQL statements
and Redis commands and the model provider's attempts, exported over OTLP/HTTP
to a collector (a real HTTP server on 127.0.0.1); the trace id is in the
access log and the `x-trace-id` answer header."""

from __future__ import annotations

import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from persona_service.kernel.tracing import trace_id_of


class Collector:
    """An OTLP/HTTP trace receiver: every span it was sent."""

    def __init__(self):
        self.spans: list = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        service = next(a.value.string_value for a in resource.resource.attributes
                                       if a.key == "service.name")
                        for scope in resource.scope_spans:
                            collector.spans += [(service, s) for s in scope.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def of_trace(self, trace_id: str) -> list:
        return [s for _, s in self.spans if s.trace_id.hex() == trace_id]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from support import TenantFactory, client_for, engine_for, make_stack, running

    collector = Collector()
    # No webhook worker: the spans checked are the edge's, the servers' and the runner's.
    made = make_stack(tmp_path_factory.mktemp("traced"), workers=0, PERSONA_OTLP_ENDPOINT=collector.url,
                      OTEL_BSP_SCHEDULE_DELAY="100")
    with running(made) as stack, engine_for(stack) as engine, client_for(stack) as http:
        yield collector, http, TenantFactory(engine)()
    collector.server.shutdown()


def _wait_for(predicate, seconds: float = 15):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_an_rpc_span_continues_the_callers_trace_with_sql_redis_and_provider_children(traced):
    collector, http, tenant = traced
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    r = http.post("/v1/personas", json={"intent": "A cartographer of quiet streets"},
                  headers={**tenant.auth, "traceparent": f"00-{trace_id}-{parent}-01"})
    assert r.status_code == 200, r.text
    assert r.headers["x-trace-id"] == trace_id

    def complete():
        names = {s.name for s in collector.of_trace(trace_id)}
        return "/persona.v1.PersonaService/CreatePersona" in names and any(n.startswith("provider.") for n in names)

    _wait_for(complete)
    spans = collector.of_trace(trace_id)
    (rpc,) = [s for s in spans if s.name == "/persona.v1.PersonaService/CreatePersona"]
    assert rpc.parent_span_id.hex() == parent  # the caller's span is the parent
    children = [s for s in spans if s.parent_span_id == rpc.span_id]
    kinds = {s.name.split(" ")[0].split(".")[0] for s in children}
    assert any(s.name.startswith("provider.") for s in spans)
    assert {"SELECT", "INSERT"} & kinds, sorted(s.name for s in spans)  # SQL statements under the RPC
    assert any(dict((a.key, a.value) for a in s.attributes).get("db.system") is not None
               or s.name.startswith(("EVALSHA", "EVAL", "GET", "SET")) for s in spans)


def test_the_trace_id_needs_no_exporter_to_reach_logs(traced):
    assert trace_id_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_of("00-00000000000000000000000000000000-00f067aa0ba902b7-01") is None
    assert trace_id_of("garbage") is None and trace_id_of(None) is None


def test_a_streamed_operation_is_traced_on_its_run(traced):
    collector, http, tenant = traced
    trace_id = uuid.uuid4().hex
    with http.stream("POST", "/v1/personas?stream=true", json={"intent": "A ferryman who hums in fog"},
                     headers={**tenant.auth, "traceparent": f"00-{trace_id}-{'2' * 16}-01"}) as r:
        assert r.status_code == 200
        r.read()
    _wait_for(lambda: any(s.name == "/persona.v1.PersonaService/StreamCreatePersona"
                          for s in collector.of_trace(trace_id)))
    spans = collector.of_trace(trace_id)
    (rpc,) = [s for s in spans if s.name == "/persona.v1.PersonaService/StreamCreatePersona"]
    assert any(s.parent_span_id == rpc.span_id and s.name.startswith("provider.") for s in spans)
