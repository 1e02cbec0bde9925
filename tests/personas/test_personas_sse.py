"""Streaming persona creation (mirrors PersonaServicer.StreamCreatePersona
and the edge's `?stream=true` routing in edge/envelope.lua): server-sent
events through Envoy read incrementally with a real streaming client, the
in-band `error` event, and the same stream over native gRPC.

Incremental delivery is proven, not assumed: the test holds an EXCLUSIVE
lock on the `personas` table (reads still work, the final INSERT waits), so
the run's progress events must reach the client while the persona itself
cannot be written yet."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time

import grpc
import httpx
import pytest
from persona.v1 import personas_pb2, personas_pb2_grpc
from sqlalchemy import text
from support import assert_envelope, personas_locked, sse_events, sse_stream, writes_locked

STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
PROGRESS = [("run.started", "")] + [(kind, step) for step in STEPS for kind in ("step.started", "step.completed")]
TIMEOUT = httpx.Timeout(15.0)


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="pro")


def stream(http, tenant, body):
    return http.stream("POST", "/v1/personas", params={"stream": "true"}, json=body, headers=tenant.auth,
                       timeout=TIMEOUT)


def test_stream_create_sends_progress_before_the_persona(http, engine, org):
    with personas_locked(engine) as lock:
        with stream(http, org, {"intent": "A wistful clockmaker who repairs music boxes"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].split(";")[0] == "text/event-stream"
            events = sse_events(r.iter_lines())
            progress = [next(events) for _ in PROGRESS]
            # All progress arrived while the persona could not be written yet: streamed, not buffered.
            assert not r.is_closed
            listed = http.get("/v1/personas", params={"limit": 100}, headers=org.auth)
            assert listed.status_code == 200, listed.text
            assert progress[0]["runId"] not in [p["lastRunId"] for p in listed.json().get("items", [])]
            lock.rollback()
            rest = list(events)
        raw_ok = r.is_closed

    assert raw_ok
    assert [(e["event"], e["step"]) for e in progress] == PROGRESS
    run_id = progress[0]["runId"]
    assert run_id.startswith("run_")
    assert all(e["runId"] == run_id for e in progress)
    for e in progress:
        if e["event"] == "step.completed":
            assert e["durationMs"] >= 0
    assert len(rest) == 1, rest
    final = rest[0]
    assert final["event"] == "persona" and final["runId"] == run_id
    persona = final["persona"]
    assert persona["lastRunId"] == run_id and persona["state"] == "active" and persona["version"] == 1

    got = http.get(f"/v1/personas/{persona['id']}", headers=org.auth)
    assert got.status_code == 200, got.text
    assert got.json() == persona

    # The run's events are the same as a unary create's.
    r = http.get("/v1/events", params={"personaId": persona["id"]}, headers=org.auth)
    assert [e["type"] for e in r.json()["items"]] == ["persona.created", "generation.run.completed",
                                                      "generation.run.started"]


def test_stream_wire_format(http, org):
    with stream(http, org, {"intent": "A patient beekeeper who tells tall tales"}) as r:
        assert r.status_code == 200
        body = r.read().decode()
    # Every event: `id: <run>.<seq>`, `event: <name>`, one `data:` line; then `end`.
    frame = r"id: (run_[0-9a-f]{32})\.(\d+)\nevent: ([a-z.]+)\ndata: (\{[^\n]*\})\n\n"
    end = r"event: end\ndata: (\{[^\n]*\})\n\n"
    assert re.fullmatch(f"({frame})+{end}", body), body[:500]
    frames = re.findall(frame, body)
    assert {run for run, *_ in frames} == {r.headers["x-run-id"]}
    assert [int(seq) for _, seq, *_ in frames] == list(range(1, len(frames) + 1))
    assert [(name, json.loads(data)["event"]) for *_, name, data in frames] == [
        (e, e) for e in [e for e, _ in PROGRESS] + ["persona"]
    ]
    assert json.loads(re.search(end, body).group(1)) == {"runId": r.headers["x-run-id"], "status": "completed"}
    # One run id: the frames' `runId` is the stream's.
    assert {json.loads(data)["runId"] for *_, data in frames} == {r.headers["x-run-id"]}


def test_stream_false_is_the_unary_create(http, org):
    r = http.post("/v1/personas", params={"stream": "false"}, json={"intent": "A quiet monk who brews cider"},
                  headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json()["state"] == "active"


def test_stream_error_mid_run_is_an_in_band_event(http, org):
    before = http.get("/v1/personas", params={"limit": 100}, headers=org.auth).json().get("items", [])
    with stream(http, org, {"intent": "how to build a bomb"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].split(";")[0] == "text/event-stream"
        events = list(sse_events(r.iter_lines(), status="failed"))
    assert [(e["event"], e["step"]) for e in events[:2]] == [("run.started", ""), ("step.started", "moderate_intent")]
    last = events[-1]
    assert len(events) == 3, events
    assert last["event"] == "error"
    error = last["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == "moderation_blocked"
    assert error["message"]
    assert error["details"]["stage"] == "input_intent"
    after = http.get("/v1/personas", params={"limit": 100}, headers=org.auth).json().get("items", [])
    assert after == before


def test_stream_validation_error_is_a_plain_envelope(http, org):
    r = http.post("/v1/personas", params={"stream": "true"}, json={"intent": ""}, headers=org.auth)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "validation_failed"


# --- frames report committed state ------------------------------------------------------


@contextlib.contextmanager
def _commit_held(engine):
    """Holds a run's commit back after it wrote the persona (its audit entry cannot be written yet), and lets
    it go a second after the run started waiting: a frame sent before the commit has reached the client and
    been read back by then."""
    with writes_locked(engine, "audit_events") as lock:
        def release() -> None:
            deadline = time.monotonic() + 15
            with engine.connect() as conn:
                while time.monotonic() < deadline and not conn.execute(text(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'audit_events'::regclass"
                )).scalar():
                    time.sleep(0.05)
            # A quiet period, on purpose: the check is that no frame names the persona before its commit, and an
            # absence has no event to wait on; a frame sent early would be read back (a 404) within it.
            time.sleep(1.0)
            lock.rollback()

        releasing = threading.Thread(target=release, daemon=True)
        releasing.start()
        try:
            yield
        finally:
            releasing.join()


def test_a_frame_naming_the_persona_comes_once_it_is_committed(http, engine, org):
    read = []
    with _commit_held(engine), stream(http, org, {"intent": "A night ferryman who collects lost umbrellas"}) as r:
        assert r.status_code == 200
        for event in sse_events(r.iter_lines()):  # each frame's resource read at once, as a client would
            if event.get("persona"):
                got = http.get(f"/v1/personas/{event['persona']['id']}", headers=org.auth)
                read.append((got.status_code, got.json() == event["persona"]))
    assert read == [(200, True)]


def test_a_native_grpc_frame_naming_the_persona_comes_once_it_is_committed(edge_channel, engine, org):
    stub = personas_pb2_grpc.PersonaServiceStub(edge_channel)
    read = []
    with _commit_held(engine):
        call = stub.StreamCreatePersona(personas_pb2.CreatePersonaRequest(intent="A glassblower who sings to kilns"),
                                        metadata=org.metadata, timeout=15)
        for event in call:
            if event.HasField("persona"):
                try:
                    read.append(stub.GetPersona(personas_pb2.GetPersonaRequest(id=event.persona.id),
                                                metadata=org.metadata, timeout=5) == event.persona)
                except grpc.RpcError as err:
                    read.append(err.code())
    assert read == [True]


# --- native gRPC ---------------------------------------------------------------------


def test_native_grpc_stream_through_the_edge(edge_channel, engine, org):
    stub = personas_pb2_grpc.PersonaServiceStub(edge_channel)
    with personas_locked(engine) as lock:
        call = stub.StreamCreatePersona(
            personas_pb2.CreatePersonaRequest(intent="A stubborn goat farmer who plays the fiddle"),
            metadata=org.metadata, timeout=15,
        )
        progress = [next(call) for _ in PROGRESS]
        lock.rollback()
        rest = list(call)
    assert [(e.event, e.step) for e in progress] == PROGRESS
    assert len({e.run_id for e in progress}) == 1
    assert len(rest) == 1 and rest[0].event == "persona"
    assert rest[0].persona.last_run_id == progress[0].run_id
    assert rest[0].persona.state == "active"
    assert call.code() == grpc.StatusCode.OK


def test_native_grpc_stream_error(edge_channel, org):
    stub = personas_pb2_grpc.PersonaServiceStub(edge_channel)
    call = stub.StreamCreatePersona(personas_pb2.CreatePersonaRequest(intent="how to build a bomb"),
                                    metadata=org.metadata, timeout=15)
    received = []
    with pytest.raises(grpc.RpcError) as info:
        for event in call:
            received.append(event)
    assert [e.event for e in received] == ["run.started", "step.started", "error"]
    assert received[-1].error.code == "moderation_blocked"
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- durable runs: leaving and resuming ------------------------------------------------


def _personas(http, tenant) -> list[dict]:
    return http.get("/v1/personas", params={"limit": 100}, headers=tenant.auth).json().get("items", [])


def _wait_for_persona(http, tenant, intent: str) -> dict:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [p for p in _personas(http, tenant) if p["intent"] == intent]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no persona for {intent!r}")


def test_a_generation_the_client_left_still_finishes(http, engine, tenants):
    tenant = tenants(plan="pro")
    intent = "A retired lighthouse keeper who paints storms"
    with personas_locked(engine) as lock:
        with stream(http, tenant, {"intent": intent}) as r:
            assert r.status_code == 200
            first = next(sse_events(r.iter_lines()))
            assert first["event"] == "run.started"
        # The client is gone; the run waits on the lock, then must still commit.
        lock.rollback()
    persona = _wait_for_persona(http, tenant, intent)
    assert persona["state"] == "active"
    events = http.get("/v1/events", params={"personaId": persona["id"]}, headers=tenant.auth).json()["items"]
    assert "persona.created" in [e["type"] for e in events]


def test_last_event_id_resumes_the_run(http, engine, tenants):
    tenant = tenants(plan="pro")
    intent = "A cartographer who maps forgotten dreams"
    with personas_locked(engine) as lock:
        with stream(http, tenant, {"intent": intent}) as r:
            run_id = r.headers["x-run-id"]
            seen = []
            for event in sse_stream(r.iter_lines()):
                seen.append(event)
                if len(seen) == 3:
                    break
        lock.rollback()
    assert [e.id for e in seen] == [f"{run_id}.{n}" for n in (1, 2, 3)]
    # Resume after the third event: the rest of the same run, not a new persona (the body is ignored).
    with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={},
                     headers={**tenant.auth, "Last-Event-ID": f"{run_id}.3"}, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        rest = list(sse_stream(r.iter_lines()))
    assert [e.id for e in rest[:-1]] == [f"{run_id}.{n}" for n in range(4, len(PROGRESS) + 2)]
    assert [e.event for e in rest[:-1]] == [name for name, _ in PROGRESS[3:]] + ["persona"]
    assert rest[-1].event == "end" and rest[-1].json() == {"runId": run_id, "status": "completed"}
    assert len([p for p in _personas(http, tenant) if p["intent"] == intent]) == 1
    # Replaying a finished run from the start gives every frame again.
    r = http.post("/v1/personas", params={"stream": "true"}, json={},
                  headers={**tenant.auth, "Last-Event-ID": f"{run_id}.0"}, timeout=TIMEOUT)
    assert [e.event for e in sse_stream(r.text.split("\n"))][-2:] == ["persona", "end"]


def test_last_event_id_of_another_org_or_malformed(http, tenants):
    owner, other = tenants(plan="pro"), tenants(plan="pro")
    r = http.post("/v1/personas", params={"stream": "true"}, json={"intent": "A falconer who fears heights"},
                  headers=owner.auth, timeout=TIMEOUT)
    run_id = r.headers["x-run-id"]
    stolen = http.post("/v1/personas", params={"stream": "true"}, json={},
                       headers={**other.auth, "Last-Event-ID": f"{run_id}.0"}, timeout=TIMEOUT)
    assert_envelope(stolen, 404, "not_found")
    bad = http.post("/v1/personas", params={"stream": "true"}, json={},
                    headers={**owner.auth, "Last-Event-ID": "42"}, timeout=TIMEOUT)
    assert assert_envelope(bad, 400, "bad_request")["details"]["parameter"] == "Last-Event-ID"
    # A run of another method is not this stream.
    chat = http.post("/v1/chat/sessions/x/messages", params={"stream": "true"}, json={"content": "hi"},
                     headers={**owner.auth, "Last-Event-ID": f"{run_id}.0"}, timeout=TIMEOUT)
    assert_envelope(chat, 404, "not_found")


def _resume(http, headers, run_id):
    return http.post("/v1/personas", params={"stream": "true"}, json={},
                     headers={**headers, "Last-Event-ID": f"{run_id}.0"}, timeout=TIMEOUT)


def test_last_event_id_of_another_workspace_is_a_run_that_does_not_exist(http, tenants, jwt_minter):
    """A run is read as the persona it writes: only from its workspace, even
    by the same organization and the same person (key or session)."""
    owner = tenants(plan="pro")
    elsewhere = tenants.workspace(owner)
    r = http.post("/v1/personas", params={"stream": "true"}, json={"intent": "A beekeeper who hums in Latin"},
                  headers=owner.auth, timeout=TIMEOUT)
    run_id = r.headers["x-run-id"]
    missing = assert_envelope(_resume(http, owner.auth, "run_" + "0" * 32), 404, "not_found")
    session = {"Authorization": "Bearer " + jwt_minter.mint_session(owner.user_id, owner.org_id,
                                                                    elsewhere.workspace_id)}
    for headers in (elsewhere.auth, session):
        refused = _resume(http, headers, run_id)
        error = assert_envelope(refused, 404, "not_found")
        assert "intent" not in refused.text and "Latin" not in refused.text
        assert {**error, "details": {**error["details"], "runId": "-"}} == \
            {**missing, "details": {**missing["details"], "runId": "-"}}  # exactly as a run that does not exist
    # Its own workspace still resumes it.
    assert [e.event for e in sse_stream(_resume(http, owner.auth, run_id).text.split("\n"))][-1] == "end"


def test_an_idempotency_key_replays_a_streamed_create_as_its_run(http, tenants):
    """Spec (Errors › Idempotency): every write accepts an `Idempotency-Key`, and a replay returns the original
    response. A streamed create's is its run: the same request again follows the same run from its first frame,
    so a client that never heard the first answer (its node lost, Envoy's 503) asks again without a second
    persona. The same key with another request: 409."""
    tenant = tenants(plan="pro")
    intent = "A lighthouse keeper who collects shipwrecked letters"
    headers = {**tenant.auth, "Idempotency-Key": f"stream-{time.time_ns()}"}
    first = http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent}, headers=headers,
                      timeout=TIMEOUT)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    again = http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent}, headers=headers,
                      timeout=TIMEOUT)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-run-id"] == first.headers["x-run-id"]
    frames = [(e.id, e.event, e.data) for e in sse_stream(first.text.split("\n"))]
    assert [(e.id, e.event, e.data) for e in sse_stream(again.text.split("\n"))] == frames
    assert frames[-1][1] == "end" and json.loads(frames[-1][2])["status"] == "completed"
    assert len([p for p in _personas(http, tenant) if p["intent"] == intent]) == 1

    other = http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent + "!"}, headers=headers,
                      timeout=TIMEOUT)
    assert_envelope(other, 409, "idempotency_conflict")
    assert other.json()["error"]["details"]["reason"] == "payload_mismatch"


def test_one_streamed_create_sent_twice_at_once_with_its_key_makes_one_run(http, tenants):
    """Two at once, one key: one claims it and starts the run; the other follows that run (a replay) or is told
    to retry (409 `in_flight`, Retry-After), as one after the other would answer. Never two personas."""
    tenant = tenants(plan="pro")
    intent = "A beekeeper who translates the hive's gossip"
    headers = {**tenant.auth, "Idempotency-Key": f"twice-{time.time_ns()}"}
    answers: list[httpx.Response] = []

    def send() -> None:
        answers.append(http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent},
                                 headers=headers, timeout=TIMEOUT))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ok = [r for r in answers if r.status_code == 200]
    assert ok and all(r.status_code in (200, 409) for r in answers), [r.text[:300] for r in answers]
    assert len({r.headers["x-run-id"] for r in ok}) == 1
    for refused in (r for r in answers if r.status_code == 409):
        assert refused.json()["error"]["details"]["reason"] == "in_flight" and refused.headers["retry-after"]
    assert len([p for p in _personas(http, tenant) if p["intent"] == intent]) == 1
