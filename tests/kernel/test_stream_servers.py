"""Stream servers (PERSONA_STREAM_SERVER_PROCESSES): server processes that serve only stream views. The edge
routes every server stream to them and no unary call, so a stream's frames never share a GIL with another
organization's reads; the unary servers are still health-checked on their own stream ports."""

from __future__ import annotations

import json
import time
import uuid

import httpx
from support import sse_stream


def _upstream(stack, request_id: str) -> str:
    deadline = time.monotonic() + 5  # Envoy flushes its access log every 200 ms
    while True:
        lines = [json.loads(line) for line in (stack.log_dir / "access.log").read_text().splitlines()
                 if request_id in line]
        if lines or time.monotonic() > deadline:
            (line,) = lines
            return line["upstream"]
        time.sleep(0.1)


def test_streams_go_to_the_stream_server_and_unary_calls_never_do(stack, tenants, http):
    # The session's stack is this shape (tests/conftest.py: one server, one stream server); the calls are
    # found in its access log by their own request ids.
    assert len(stack.grpc_ports) == 1 and len(stack.stream_server_ports) == 1
    tenant = tenants(plan="pro")
    unary_id, stream_id = f"req-unary-{uuid.uuid4().hex[:8]}", f"req-stream-{uuid.uuid4().hex[:8]}"
    made = http.post("/v1/personas", json={"intent": "A tide clock mender"},
                     headers={**tenant.auth, "X-Request-Id": unary_id})
    assert made.status_code == 200, made.text
    with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": "A harbour bell tuner"},
                     headers={**tenant.auth, "X-Request-Id": stream_id}) as r:
        assert r.status_code == 200
        events = list(sse_stream(r.iter_lines()))
    assert events[-1].event == "end" and events[-1].json()["status"] == "completed", events[-1]
    assert _upstream(stack, unary_id) == f"127.0.0.1:{stack.grpc_ports[0]}"
    assert _upstream(stack, stream_id) == f"127.0.0.1:{stack.stream_port(stack.stream_server_ports[0])}"
    assert httpx.get(f"{stack.http_url}/readyz").status_code == 200
