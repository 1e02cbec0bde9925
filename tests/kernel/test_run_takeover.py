"""Durable runs across processes (kernel.transport.runs): a streamed generation
outlives the server that accepted it and the runner that ran it. A second
node (a server and its edge, no runner) runs beside the test stack on its
PostgreSQL and Redis; the stack's runner runs what the node accepts. When the
node is drained (SIGTERM) its views end and the client resumes on the stack's
edge with `Last-Event-ID`; when the node and the runner are killed (SIGKILL)
the runner started again takes the runs over once their leases ran out:
every frame once, in order, and one persona.

The persona table is locked while the node runs (support.personas_locked):
the run streams its steps but cannot commit until the lock goes, so the node
always dies mid-run."""

from __future__ import annotations

import json
import os
import signal

import httpx
import pytest
from persona_service.providers import attempt_keyed
from sqlalchemy import text
from support import make_stack_beside, personas_locked, running, sse_stream

STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
PROGRESS = ["run.started"] + [kind for _ in STEPS for kind in ("step.started", "step.completed")]
TIMEOUT = httpx.Timeout(30.0)
# A lease longer than a resume waits: only a run given back (drain) is taken over in time.
LONG_LEASE = "120"
SHORT_LEASE = "1.5"  # renewed every 0.5 s; a killed node's runs are taken over ~2 s later


@pytest.fixture(scope="module")
def node(stack, tmp_path_factory):
    """Node A: its own server process and edge on the stack's PostgreSQL and Redis (the stack's runner runs
    its runs)."""
    other = make_stack_beside(stack, tmp_path_factory.mktemp("node"), settings={"runner_processes": 0},
                              PERSONA_DRAIN_SECONDS="0.2", PERSONA_RUN_LEASE_SECONDS=LONG_LEASE)
    with running(other):
        yield other


def _with_lease(node, seconds: str) -> int:
    """Node A's server port, the server (re)started if it is down or its run lease is not `seconds`."""
    port = node.grpc_ports[0]
    if node.process(f"server-{port}") is None or node.extra_env["PERSONA_RUN_LEASE_SECONDS"] != seconds:
        node.stop_server(port)
        node.extra_env["PERSONA_RUN_LEASE_SECONDS"] = seconds
        node.start_server(port)
    return port


def _kill_runner(stack) -> None:
    """`kill -9` of the stack's runner mid-run: its supervisor starts it again; it takes the runs over once the
    dead one's leases ran out."""
    runner = stack.process("runner-0")
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()


def _start_on(node, tenant, intent: str, frames: int, path: str = "/v1/personas", body: dict | None = None):
    """Start a stream on `node` (a persona's creation unless told) and read its first `frames` events; the
    connection stays open."""
    client = httpx.Client(base_url=node.http_url, timeout=TIMEOUT)
    response = client.send(client.build_request("POST", path, params={"stream": "true"},
                                                json=body or {"intent": intent}, headers=tenant.auth), stream=True)
    assert response.status_code == 200, response.read()
    events = sse_stream(response.iter_lines())
    seen = [next(events) for _ in range(frames)]
    return client, response, events, seen


def _resume(http, tenant, event_id: str, path: str = "/v1/personas") -> list:
    with http.stream("POST", path, params={"stream": "true"}, json={},
                     headers={**tenant.auth, "Last-Event-ID": event_id}, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        return list(sse_stream(r.iter_lines()))


def _check_one_run(http, engine, tenant, intent: str, run_id: str, seen: list, rest: list) -> None:
    events = seen + rest[:-1]
    assert [e.id for e in events] == [f"{run_id}.{n}" for n in range(1, len(PROGRESS) + 2)], \
        [(e.id, e.event) for e in seen + rest]  # no gap, no repeat
    assert [e.event for e in events] == [*PROGRESS, "persona"]
    assert rest[-1].event == "end" and rest[-1].json() == {"runId": run_id, "status": "completed"}
    persona = events[-1].json()["persona"]
    # The run taken over is the same generation: the run id streamed first, its steps not run again.
    assert persona["lastRunId"] == events[0].json()["runId"]
    items = http.get("/v1/personas", params={"limit": 100}, headers=tenant.auth).json()["items"]
    assert [p["id"] for p in items if p["intent"] == intent] == [persona["id"]]
    with engine.connect() as conn:
        steps = conn.execute(text("SELECT step, status FROM generation_steps WHERE run_id = :r ORDER BY ordinal"),
                             {"r": persona["lastRunId"]}).all()
        created = conn.execute(text("SELECT count(*) FROM events WHERE type = 'persona.created' "
                                    "AND data->>'personaId' = :p"), {"p": persona["id"]}).scalar()
    assert steps == [(step, "completed") for step in STEPS]
    assert created == 1


def test_a_drained_node_hands_its_runs_and_streams_over(node, http, engine, tenants):
    tenant = tenants(plan="pro")
    intent = "A cellist who tunes thunderstorms"
    port = _with_lease(node, LONG_LEASE)
    with personas_locked(engine) as lock:
        client, response, events, seen = _start_on(node, tenant, intent, 3)
        run_id = response.headers["x-run-id"]
        node.stop_server(port)  # SIGTERM: drain (Runs.hand_over gives the run back at once)
        # The node's view ends without an `end` event (the run goes on elsewhere): the client resumes.
        try:
            seen += list(events)
        except (httpx.HTTPError, AssertionError):  # cut mid-frame: as good as a clean end for resuming
            pass
        assert "end" not in [e.event for e in seen]
        client.close()
        lock.rollback()
    rest = _resume(http, tenant, seen[-1].id)
    _check_one_run(http, engine, tenant, intent, run_id, seen, rest)


def test_runs_whose_node_was_killed_are_taken_over_and_their_streams_resume_elsewhere(stack, node, http, engine,
                                                                                     tenants):
    """A persona's generation and a chat reply, both mid-run when node A and the runner are killed."""
    tenant = tenants(plan="pro")
    intent = "A glassblower who hears colours"
    persona = http.post("/v1/personas", json={"intent": "A jazz pianist who counts in colours"},
                        headers=tenant.auth).json()["id"]
    session = http.post("/v1/chat/sessions", json={"personaId": persona}, headers=tenant.auth).json()["sessionId"]
    chat_path = f"/v1/chat/sessions/{session}/messages"
    port = _with_lease(node, SHORT_LEASE)
    with personas_locked(engine) as lock, engine.connect() as chat_lock:
        # The reply streams (its session locked, its history read), but its messages cannot be stored yet.
        chat_lock.execute(text("LOCK TABLE chat_messages IN EXCLUSIVE MODE"))
        client, response, _, seen = _start_on(node, tenant, intent, 3)
        chat_client, chat_response, _, chat_seen = _start_on(
            node, tenant, "", 2, chat_path, {"content": "What do you love about jazz?"})
        os.kill(node.process(f"server-{port}").pid, signal.SIGKILL)
        node.stop_server(port)  # for good: the client resumes on the stack's edge
        _kill_runner(stack)
        for c in (response, chat_response, client, chat_client):
            c.close()
        lock.rollback()
        chat_lock.rollback()
    rest = _resume(http, tenant, seen[-1].id)
    _check_one_run(http, engine, tenant, intent, response.headers["x-run-id"], seen, rest)

    chat_rest = _resume(http, tenant, chat_seen[-1].id, chat_path)
    run_id, events = chat_response.headers["x-run-id"], chat_seen + chat_rest[:-1]
    assert [e.id for e in events] == [f"{run_id}.{n}" for n in range(1, len(events) + 1)]
    assert events[0].event == "message.started" and events[-1].event == "message.completed"
    assert {e.event for e in events[1:-1]} == {"message.delta"}
    assert chat_rest[-1].json() == {"runId": run_id, "status": "completed"}
    done = events[-1].json()
    assert "".join(e.json()["delta"] for e in events[1:-1]) == done["reply"]["content"]
    messages = http.get(f"{chat_path}", headers=tenant.auth).json()["items"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "What do you love about jazz?"), ("assistant", done["reply"]["content"])]


def _chat_reply(http, tenant, persona: str, content: str):
    session = http.post("/v1/chat/sessions", json={"personaId": persona}, headers=tenant.auth).json()["sessionId"]
    path = f"/v1/chat/sessions/{session}/messages"

    def texts(events) -> tuple[list[str], bool]:
        end = events[-1]
        return [e.json()["delta"] for e in events if e.event == "message.delta"], \
            end.event == "end" and end.json()["status"] == "completed"

    def stored() -> str:
        return http.get(path, headers=tenant.auth).json()["items"][-1]["content"]

    return path, {"content": content}, texts, stored


def _completion(http, tenant, persona: str, content: str):
    user = f"takeover-{persona}"

    def texts(events) -> tuple[list[str], bool]:
        chunks = [json.loads(e.data) for e in events if e.data != "[DONE]"]
        return [c["choices"][0]["delta"]["content"] for c in chunks[1:] if c["choices"][0]["delta"]], \
            events[-1].data == "[DONE]"

    def stored() -> str:
        session = http.get("/v1/chat/sessions", params={"userId": user}, headers=tenant.auth).json()["items"][0]
        return http.get(f"/v1/chat/sessions/{session['sessionId']}/messages",
                        headers=tenant.auth).json()["items"][-1]["content"]

    body = {"model": f"persona://{persona}", "messages": [{"role": "user", "content": content}], "user": user,
            "stream": True}
    return "/v1/chat/completions", body, texts, stored


def test_a_reply_taken_over_goes_on_from_the_text_its_client_saw(stack, node, http, tenants):
    """A sampling model words each attempt differently (the attempt-keyed test provider: "Take 1. …" then
    "Take 2. …"); a chat message's reply and a streamed completion are killed mid-reply with their runner, the
    next attempt continues what was sent, so each client's deltas, before the kill and after resuming, are
    the stored reply."""
    tenant = tenants(plan="pro")
    persona = http.post("/v1/personas", json={"intent": "A beekeeper who reads weather in hives"},
                        headers=tenant.auth).json()["id"]
    port = _with_lease(node, SHORT_LEASE)
    started = []
    for surface in (_chat_reply, _completion):
        path, body, texts, stored = surface(http, tenant, persona, f"How are the hives? {attempt_keyed.TRIGGER}")
        client, response, _, seen = _start_on(node, tenant, "", 1 + attempt_keyed.HOLD_AFTER, path, body)
        started.append((path, texts, stored, client, response, seen))
    os.kill(node.process(f"server-{port}").pid, signal.SIGKILL)
    node.stop_server(port)  # for good: the clients resume on the stack's edge
    _kill_runner(stack)  # the runner started again takes the runs over (attempt 2)
    for path, texts, stored, client, response, seen in started:
        response.close()
        client.close()
        run_id, events = response.headers["x-run-id"], seen + _resume(http, tenant, seen[-1].id, path)
        ids = [e.id for e in events if e.event != "end"]
        assert ids == [f"{run_id}.{n}" for n in range(1, len(ids) + 1)]  # no gap, no repeat
        before, _ = texts(seen)
        after, ended = texts(events)
        assert ended and "".join(before).startswith("Take 1. "), [e.data for e in events]
        assert "".join(after) == stored()
        assert stored().startswith("".join(before)) and len(stored()) > len("".join(before))
