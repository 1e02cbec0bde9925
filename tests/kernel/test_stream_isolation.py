"""Open streams never take a unary worker: server streams run on each server
process's stream port (own threads, own database pool), routed there by the
edge. With three times as many slow streams open as there are unary threads,
another organization's unary calls still answer at once."""

from __future__ import annotations

import threading
import time

import httpx
from providers.openai_stub import OpenAIStub
from support import TenantFactory, client_for, engine_for, make_stack, running

UNARY_THREADS = 4
STREAMS = 3 * UNARY_THREADS
STALL_SECONDS = 6.0


def test_slow_streams_do_not_starve_unary_calls(tmp_path):
    with OpenAIStub() as stub, running(make_stack(  # (no webhook worker: nothing here is delivered)
        tmp_path, workers=0, **stub.stack_env(PERSONA_GRPC_WORKERS=str(UNARY_THREADS)),
    )) as stack, engine_for(stack) as engine, client_for(stack) as http:
        tenants = TenantFactory(engine)
        streamer, other = tenants(plan="enterprise"), tenants(plan="pro")
        persona = http.post("/v1/personas", json={"intent": "A patient lighthouse keeper"}, headers=streamer.auth)
        assert persona.status_code == 200, persona.text
        model = f"persona://{persona.json()['id']}"
        # Every streamed completion now stalls upstream after its first chunk.
        stub.inject_delay(times=STREAMS, seconds=STALL_SECONDS, path="/chat/completions", mid_stream=True)
        opened = threading.Barrier(STREAMS + 1, timeout=30)
        results: list[str] = []
        ended: list[float] = []  # when each stream ended (its stall over)

        def stream() -> None:
            body = {"model": model, "messages": [{"role": "user", "content": "Tell me a story"}], "stream": True}
            with httpx.Client(base_url=stack.http_url, timeout=60) as c, \
                    c.stream("POST", "/v1/chat/completions", json=body, headers=streamer.auth) as r:
                chunks = r.iter_bytes()
                next(chunks)  # the first chunk: the stream is open and stalled upstream
                opened.wait()
                results.append(b"".join(chunks).decode())
                ended.append(time.monotonic())

        threads = [threading.Thread(target=stream) for _ in range(STREAMS)]
        for t in threads:
            t.start()
        opened.wait()
        answered = []
        for _ in range(10):
            r = http.get(f"/v1/orgs/{other.org_id}", headers=other.auth)
            answered.append(time.monotonic())
            assert r.status_code == 200
        for t in threads:
            t.join(60)
        # An order, not a speed (issue 46; it was max latency < 1 s): a unary call was answered while every
        # stalled stream was still open. Had the streams (three times the unary threads) held the unary threads, it
        # would have waited for a stream to end, STALL_SECONDS after they opened. (The first: ten calls on a loaded
        # machine may outlast the stall.)
        assert len(ended) == STREAMS and answered[0] < min(ended), (answered, ended)
        assert len(results) == STREAMS and all(text.rstrip().endswith("data: [DONE]") for text in results)
