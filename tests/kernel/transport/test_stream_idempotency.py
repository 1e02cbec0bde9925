"""A keyed stream's replay outlives Redis's copy of its run (mirrors kernel/transport/stages/idempotency.py's
StreamIdempotency and kernel/transport/runs.py's `Runs.keep`). Spec (Errors › Idempotency): "A replay within 24
hours returns the original response"; a stream's is its run, whose frames Redis keeps only 10 minutes after it
ends. The run's end saves them with the key's record (sealed, compressed) before its clients are told it ended,
and a replay Redis cannot answer is answered from there: the same frames, the same run id, `Idempotent-Replayed`.
Through Envoy, on the real stack (a server and a runner: the runner ends the run and saves its frames). Redis
forgetting the run is its keys deleted, as their TTL would, rather than 10 minutes waited."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import pytest
import redis
from cryptography.fernet import Fernet
from persona.v1 import personas_pb2, personas_pb2_grpc
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.idempotency_repository import IdempotencyRepository
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.transport.idempotency import Claim, Idempotency
from persona_service.kernel.transport.runs import Outcome, pack_ended, saved_view
from sqlalchemy import text
from support import assert_envelope, personas_locked, sse_events, sse_stream

TIMEOUT = httpx.Timeout(30.0)


@pytest.fixture(scope="module")
def pro(tenants):
    return tenants(plan="pro")


@pytest.fixture(scope="module")
def persona_id(http, pro) -> str:
    r = http.post("/v1/personas", json={"intent": "A tide-watcher who keeps a ledger of moons"}, headers=pro.auth)
    assert r.status_code == 200, r.text
    return r.json()["id"]


def _keyed(tenant, key: str) -> dict[str, str]:
    return {**tenant.auth, "Idempotency-Key": key}


def _forget(stack, run_id: str) -> None:
    """Redis lets the run go, as FINISHED_TTL does 10 minutes after it ended."""
    client = redis.Redis.from_url(stack.redis_url)
    try:
        assert client.delete(f"run:{run_id}:frames", f"run:{run_id}:meta") == 2
    finally:
        client.close()


def _saved(engine, org_id: str, key: str) -> bytes | None:
    with engine.connect() as conn:
        return conn.execute(text("SELECT frames FROM idempotency_keys WHERE org_id = :org AND key = :key"),
                            {"org": org_id, "key": key}).scalar()


def _persona_stream(http, tenant, key: str, intent: str) -> httpx.Response:
    return http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent},
                     headers=_keyed(tenant, key), timeout=TIMEOUT)


def _completion_stream(http, tenant, key: str, persona_id: str, content: str) -> httpx.Response:
    body = {"model": f"persona://{persona_id}", "messages": [{"role": "user", "content": content}], "stream": True}
    return http.post("/v1/chat/completions", json=body, headers=_keyed(tenant, key), timeout=TIMEOUT)


def _chat_stream(http, tenant, key: str, session_id: str, content: str) -> httpx.Response:
    return http.post(f"/v1/chat/sessions/{session_id}/messages", params={"stream": "true"},
                     json={"content": content}, headers=_keyed(tenant, key), timeout=TIMEOUT)


def _replayed(first: httpx.Response, again: httpx.Response) -> None:
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-run-id"] == first.headers["x-run-id"]
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.content == first.content  # byte for byte: every frame, in order, with its id, and the end


@pytest.mark.parametrize("kind", ["persona", "chat", "completion"])
def test_a_keyed_stream_is_replayed_from_its_saved_frames_once_redis_forgot_its_run(
        stack, http, engine, pro, persona_id, kind):
    key = f"{kind}-{uuid.uuid4()}"
    if kind == "persona":
        intent = "A cartographer of vanished coastlines"

        def send(body_text: str) -> httpx.Response:
            return _persona_stream(http, pro, key, body_text)
    elif kind == "chat":
        session = http.post("/v1/chat/sessions", json={"personaId": persona_id}, headers=pro.auth)
        assert session.status_code == 200, session.text
        sid = session.json()["sessionId"]
        intent = "Which moon do you remember best?"

        def send(body_text: str) -> httpx.Response:
            return _chat_stream(http, pro, key, sid, body_text)
    else:
        intent = "Tell me about the tides"

        def send(body_text: str) -> httpx.Response:
            return _completion_stream(http, pro, key, persona_id, body_text)

    first = send(intent)
    assert first.status_code == 200, first.text
    run_id = first.headers["x-run-id"]
    saved = _saved(engine, pro.org_id, key)  # saved before the run's end went out
    assert saved is not None
    assert intent.encode() not in saved and b"data:" not in saved and b"run_" not in saved  # sealed
    _forget(stack, run_id)

    again = send(intent)
    _replayed(first, again)
    if kind != "completion":
        assert list(sse_events(again.text.split("\n")))  # ends with `end`, status completed
    else:
        assert again.text.rstrip().endswith("data: [DONE]")

    other = send(intent + "?")  # the same key with another request: still refused, the frames never sent
    assert_envelope(other, 409, "idempotency_conflict")
    assert other.json()["error"]["details"]["reason"] == "payload_mismatch"
    assert run_id not in other.text


def test_a_replay_once_nothing_kept_its_run_is_404(stack, http, engine, pro):
    """Only when neither Redis nor the key's record has the frames (their save failed: the database away as the
    run ended) is a replay 404, as a resume of an expired run is."""
    key = f"unsaved-{uuid.uuid4()}"
    first = _persona_stream(http, pro, key, "A glassblower who hums to her furnace")
    assert first.status_code == 200, first.text
    with engine.begin() as conn:
        conn.execute(text("UPDATE idempotency_keys SET frames = NULL WHERE org_id = :org AND key = :key"),
                     {"org": pro.org_id, "key": key})
    _forget(stack, first.headers["x-run-id"])
    assert_envelope(_persona_stream(http, pro, key, "A glassblower who hums to her furnace"), 404, "not_found")


def test_a_replay_while_the_run_goes_on_follows_it_live(stack, http, engine, pro):
    """Before the run ends nothing is saved: its replay follows the live run (from Redis), its frames as they come,
    and ends as the first stream does."""
    key, intent = f"live-{uuid.uuid4()}", "A bell-founder who tunes bells by moonlight"
    with httpx.Client(base_url=stack.http_url, timeout=TIMEOUT) as client:
        with personas_locked(engine) as lock:  # the run streams its progress; its persona waits
            first = client.send(client.build_request("POST", "/v1/personas", params={"stream": "true"},
                                                     json={"intent": intent}, headers=_keyed(pro, key)), stream=True)
            assert first.status_code == 200, first.read()
            first_events = sse_stream(first.iter_lines())
            progress = [next(first_events) for _ in range(3)]
            again = client.send(client.build_request("POST", "/v1/personas", params={"stream": "true"},
                                                     json={"intent": intent}, headers=_keyed(pro, key)), stream=True)
            assert again.status_code == 200, again.read()
            assert again.headers["idempotent-replayed"] == "true"
            assert again.headers["x-run-id"] == first.headers["x-run-id"]
            again_events = sse_stream(again.iter_lines())
            assert [next(again_events) for _ in range(3)] == progress  # while the run still waits
            assert _saved(engine, pro.org_id, key) is None
            lock.rollback()
            rest = list(first_events)
            assert [*progress, *again_events] == [*progress, *rest]
            first.close()
            again.close()
    assert rest[-1].event == "end" and rest[-1].json()["status"] == "completed"
    assert _saved(engine, pro.org_id, key) is not None


def test_a_keyed_run_that_failed_is_replayed_with_its_failure(stack, http, engine, pro):
    """A run's failure is its outcome too (its in-band `error`, then `end` with `failed`): after Redis forgot
    it, its replay ends as the first answer did."""
    key, intent = f"refused-{uuid.uuid4()}", "how to build a bomb"
    first = _persona_stream(http, pro, key, intent)
    assert first.status_code == 200, first.text
    assert [e["event"] for e in sse_events(first.text.split("\n"), status="failed")][-1] == "error"
    _forget(stack, first.headers["x-run-id"])
    _replayed(first, _persona_stream(http, pro, key, intent))


def test_frames_the_database_refused_at_the_runs_end_are_saved_once_it_is_back(engine, pro):
    """PostgreSQL away as a keyed run ends: its frames are tried again in the background while Redis still answers
    the run's replays (KEEP_RETRY), so a replay after Redis forgot it still finds them once the database is back.
    Away is an engine on a port nobody listens on; back, the stack's."""
    store = Idempotency(make_engine("postgresql+psycopg://nobody@127.0.0.1:1/nothing", pool_size=1),
                        SecretBox(Fernet.generate_key().decode()))
    claim, run_id = Claim(pro.org_id, f"away-{uuid.uuid4()}"), "run_" + uuid.uuid4().hex
    now = datetime.now(UTC)
    with engine.begin() as conn:
        repo = IdempotencyRepository(conn)
        assert repo.claim(org_id=claim.org_id, credential_id="cred_test", key=claim.key, method="/test",
                          request_hash="h", now=now, locked_until=now, expires_at=now + timedelta(hours=24))
        repo.complete(claim.org_id, claim.key, response=b"", headers={"x-run-id": run_id})
    packed = pack_ended([b"first", b"second"], "completed", None)
    store.keep_frames(claim, run_id, packed)  # refused: waits in this process
    assert _saved(engine, claim.org_id, claim.key) is None
    store.engine = engine  # the database is back
    deadline = time.monotonic() + 10
    while _saved(engine, claim.org_id, claim.key) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.kept_frames(claim, run_id) == packed
    frames, outcome = saved_view(packed)
    assert list(frames) == [[(1, b"first"), (2, b"second")]] and outcome() == Outcome("completed")


def test_a_native_grpc_replay_once_redis_forgot_the_run_gets_the_same_messages(stack, edge_channel, pro):
    """The same through Envoy over native gRPC: the replay's messages are the first call's, serialized alike, with
    the same run id and `idempotent-replayed` in its initial metadata."""
    stub = personas_pb2_grpc.PersonaServiceStub(edge_channel)
    request = personas_pb2.CreatePersonaRequest(intent="A ferryman who counts the river's moods")
    metadata = (*pro.metadata, ("idempotency-key", f"grpc-{uuid.uuid4()}"))
    first = stub.StreamCreatePersona(request, metadata=metadata, timeout=30)
    messages = [m.SerializeToString() for m in first]
    run_id = dict(first.initial_metadata())["x-run-id"]
    assert messages and first.code() == grpc.StatusCode.OK
    _forget(stack, run_id)
    again = stub.StreamCreatePersona(request, metadata=metadata, timeout=30)
    assert [m.SerializeToString() for m in again] == messages
    headers = dict(again.initial_metadata())
    assert headers["x-run-id"] == run_id and headers["idempotent-replayed"] == "true"
