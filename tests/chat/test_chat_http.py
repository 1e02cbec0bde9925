"""Chat sessions and messages over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/chat.py): lifecycle and 409s, listing and
pagination, accounting (exact, also under concurrent posts), SSE framing
and ordering, drift detection in both modes with events, output
moderation with review item and event, per-persona drift thresholds,
tenant isolation, and the native gRPC form."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
import support
from persona.v1 import chat_pb2, chat_pb2_grpc
from persona_service.kernel.transport.outbox import AUDIT_FAILED_FIELDS
from persona_service.providers.pricing import DEFAULT_PRICES
from sqlalchemy import text
from support import assert_envelope

SESSION_FIELDS = {
    "sessionId", "orgId", "workspaceId", "personaId", "userId", "title", "status", "messageCount", "inputTokens",
    "outputTokens", "costUsdMicros", "startedAt", "lastActiveAt", "endedAt",
    "personaVersion",  # beyond the spec's fourteen: the pinned persona version, 0 when not pinned (#41)
    "unpricedReplies",  # beyond them too: replies whose model had no price, left out of costUsdMicros (#48)
}
ACTION = "engine.pipeline.drift_detection.action_on_alert"
THRESHOLD = "engine.pipeline.drift_detection.threshold"


def make_persona(http, tenant, intent="A grumpy lighthouse keeper who loves jazz") -> str:
    r = http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()["id"]


def make_session(http, tenant, persona_id, **extra) -> dict:
    r = http.post("/v1/chat/sessions", json={"personaId": persona_id, **extra}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def send(http, tenant, session_id, content):
    return http.post(f"/v1/chat/sessions/{session_id}/messages", json={"content": content}, headers=tenant.auth)


def events(http, tenant, persona_id, type_):
    r = http.get("/v1/events", params={"personaId": persona_id, "type": type_}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()["items"]


def set_config(http, tenant, key, value, **extra):
    r = http.put(f"/v1/config/{key}", json={"value": value, **extra}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def chat(http, tenants):
    tenant = tenants()
    return tenant, make_persona(http, tenant)


def test_session_has_the_fourteen_fields(http, chat):
    tenant, persona_id = chat
    session = make_session(http, tenant, persona_id, title="Hello", userId="end-user-1")
    assert set(session) == SESSION_FIELDS
    assert session["sessionId"].startswith("chs_")
    assert session["status"] == "active"
    assert session["personaId"] == persona_id and session["userId"] == "end-user-1" and session["title"] == "Hello"
    assert session["orgId"] == tenant.org_id and session["workspaceId"] == tenant.workspace_id
    for counter in ("messageCount", "inputTokens", "outputTokens", "costUsdMicros"):
        assert session[counter] == 0 and isinstance(session[counter], (int, float))
    assert session["endedAt"] is None
    r = http.get(f"/v1/chat/sessions/{session['sessionId']}", headers=tenant.auth)
    assert r.status_code == 200 and r.json() == session


def test_unknown_persona_or_session_is_404(http, chat):
    tenant, _ = chat
    r = http.post("/v1/chat/sessions", json={"personaId": "00000000-0000-4000-8000-000000000000"}, headers=tenant.auth)
    assert_envelope(r, 404, "not_found")
    assert_envelope(http.get("/v1/chat/sessions/chs_nope", headers=tenant.auth), 404, "not_found")
    assert_envelope(send(http, tenant, "chs_nope", "hi"), 404, "not_found")
    r = http.post("/v1/chat/sessions", json={}, headers=tenant.auth)
    assert_envelope(r, 422, "validation_failed")


def test_lifecycle_and_conflicts(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    r = http.post(f"/v1/chat/sessions/{sid}/end", json={}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    ended = r.json()
    assert ended["status"] == "ended" and ended["endedAt"].endswith("Z")
    error = assert_envelope(http.post(f"/v1/chat/sessions/{sid}/end", json={}, headers=tenant.auth), 409, "state_conflict")
    assert error["details"]["conflictField"] == "status"
    assert_envelope(send(http, tenant, sid, "Are you there?"), 409, "state_conflict")
    r = http.post(f"/v1/chat/sessions/{sid}/archive", json={}, headers=tenant.auth)
    assert r.status_code == 200 and r.json()["status"] == "archived"
    assert r.json()["endedAt"] == ended["endedAt"]
    assert_envelope(send(http, tenant, sid, "Hello?"), 409, "state_conflict")
    assert_envelope(http.post(f"/v1/chat/sessions/{sid}/end", json={}, headers=tenant.auth), 409, "state_conflict")
    assert_envelope(http.post(f"/v1/chat/sessions/{sid}/archive", json={}, headers=tenant.auth), 409, "state_conflict")
    # Archiving an active session ends it too.
    other = make_session(http, tenant, persona_id)["sessionId"]
    r = http.post(f"/v1/chat/sessions/{other}/archive", json={}, headers=tenant.auth)
    assert r.json()["status"] == "archived" and r.json()["endedAt"] is not None


def test_message_reply_and_accounting(http, chat):
    tenant, persona_id = chat
    session = make_session(http, tenant, persona_id)
    sid = session["sessionId"]
    r = send(http, tenant, sid, "Hello, who are you?")
    assert r.status_code == 200, r.text
    body = r.json()
    reply, user = body["reply"], body["userMessage"]
    assert user["role"] == "user" and user["content"] == "Hello, who are you?" and user["ordinal"] == 1
    assert reply["role"] == "assistant" and reply["ordinal"] == 2 and reply["id"].startswith("msg_")
    assert reply["content"] and reply["model"] == "local-persona-1"
    assert 0 <= reply["driftScore"] <= 0.35 and reply["recovered"] is False
    usage = reply["usage"]
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    price = DEFAULT_PRICES["local-persona-1"]
    assert usage["costUsdMicros"] == round(usage["inputTokens"] * price.input_per_million
                                           + usage["outputTokens"] * price.output_per_million)
    after = body["session"]
    assert after["messageCount"] == 2
    assert after["inputTokens"] == usage["inputTokens"] and after["outputTokens"] == usage["outputTokens"]
    assert after["costUsdMicros"] == usage["costUsdMicros"]
    assert after["lastActiveAt"] >= session["lastActiveAt"] and after["startedAt"] == session["startedAt"]
    # The second message carries the history: more input tokens.
    r2 = send(http, tenant, sid, "Tell me about the sea.")
    assert r2.status_code == 200, r2.text
    assert r2.json()["reply"]["usage"]["inputTokens"] > usage["inputTokens"]
    final = http.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()
    assert final["messageCount"] == 4
    assert final["inputTokens"] == usage["inputTokens"] + r2.json()["reply"]["usage"]["inputTokens"]
    # Durable: the database agrees.
    listed = http.get(f"/v1/chat/sessions/{sid}/messages", headers=tenant.auth).json()
    assert [m["ordinal"] for m in listed["items"]] == [1, 2, 3, 4]
    assert [m["role"] for m in listed["items"]] == ["user", "assistant", "user", "assistant"]
    assert listed["nextCursor"] == ""


def test_message_pagination(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    for i in range(3):
        assert send(http, tenant, sid, f"Message number {i}").status_code == 200
    seen, token = [], ""
    while True:
        params = {"limit": 4, **({"cursor": token} if token else {})}
        page = http.get(f"/v1/chat/sessions/{sid}/messages", params=params, headers=tenant.auth).json()
        seen += [m["ordinal"] for m in page["items"]]
        token = page["nextCursor"]
        if not token:
            break
    assert seen == [1, 2, 3, 4, 5, 6]
    r = http.get(f"/v1/chat/sessions/{sid}/messages", params={"cursor": "garbage"}, headers=tenant.auth)
    assert r.status_code == 400


def test_concurrent_posts_lose_no_counts(stack, tenants, engine):
    tenant = tenants()
    with httpx.Client(base_url=stack.http_url, timeout=60) as client:
        persona_id = make_persona(client, tenant, "A patient chess coach")
        sid = make_session(client, tenant, persona_id)["sessionId"]

        def post(i):
            return send(client, tenant, sid, f"Question {i}: what about the opening?")

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(post, range(16)))
        assert all(r.status_code == 200 for r in results), [r.text for r in results if r.status_code != 200]
        session = client.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()
    usages = [r.json()["reply"]["usage"] for r in results]
    assert session["messageCount"] == 32
    assert session["inputTokens"] == sum(u["inputTokens"] for u in usages)
    assert session["outputTokens"] == sum(u["outputTokens"] for u in usages)
    assert session["costUsdMicros"] == sum(u["costUsdMicros"] for u in usages)
    with engine.connect() as conn:
        ordinals = conn.execute(text("SELECT ordinal FROM chat_messages WHERE session_id = :s ORDER BY ordinal"),
                                {"s": sid}).scalars().all()
    assert ordinals == list(range(1, 33))


def test_list_sessions_filters_and_pages(http, tenants):
    tenant = tenants()
    p1, p2 = make_persona(http, tenant, "A cheerful baker"), make_persona(http, tenant, "A stern librarian")
    a = make_session(http, tenant, p1, userId="u-a")["sessionId"]
    b = make_session(http, tenant, p1, userId="u-b")["sessionId"]
    c = make_session(http, tenant, p2, userId="u-a")["sessionId"]
    http.post(f"/v1/chat/sessions/{b}/end", json={}, headers=tenant.auth)

    def ids(**params):
        r = http.get("/v1/chat/sessions", params=params, headers=tenant.auth)
        assert r.status_code == 200, r.text
        return [s["sessionId"] for s in r.json()["items"]]

    assert ids() == [c, b, a]
    assert ids(personaId=p1) == [b, a]
    assert ids(status="ended") == [b]
    assert ids(userId="u-a") == [c, a]
    first = http.get("/v1/chat/sessions", params={"limit": 2}, headers=tenant.auth).json()
    assert len(first["items"]) == 2 and first["nextCursor"]
    rest = http.get("/v1/chat/sessions", params={"limit": 2, "cursor": first["nextCursor"]},
                    headers=tenant.auth).json()
    assert [s["sessionId"] for s in first["items"] + rest["items"]] == [c, b, a]
    assert_envelope(http.get("/v1/chat/sessions", params={"status": "gone"}, headers=tenant.auth), 422,
                    "validation_failed")


def sse_events(response, status: str = "completed") -> list[dict]:
    assert response.headers["content-type"].startswith("text/event-stream")
    return list(support.sse_events(response.iter_lines(), status))


def test_streamed_reply(stack, chat):
    tenant, persona_id = chat
    with httpx.Client(base_url=stack.http_url, timeout=30) as client:
        sid = make_session(client, tenant, persona_id)["sessionId"]
        with client.stream("POST", f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"},
                           json={"content": "What do you love about jazz?"}, headers=tenant.auth) as r:
            assert r.status_code == 200
            got = sse_events(r)
        kinds = [e["event"] for e in got]
        assert kinds[0] == "message.started" and kinds[-1] == "message.completed"
        assert set(kinds[1:-1]) == {"message.delta"} and len(kinds) > 3
        done = got[-1]
        assert "".join(e["delta"] for e in got[1:-1]) == done["reply"]["content"]
        assert done["session"]["messageCount"] == 2 and done["userMessage"]["ordinal"] == 1
        assert done["session"]["inputTokens"] == done["reply"]["usage"]["inputTokens"]
        # Stream and unary forms produce the same reply for the same history.
        other = make_session(client, tenant, persona_id)["sessionId"]
        unary = send(client, tenant, other, "What do you love about jazz?").json()
        assert unary["reply"]["content"] == done["reply"]["content"]
        # One JSON form per field: a frame prints a whole double as the unary answer does (`354`, never `354.0`).
        assert done["reply"]["usage"] == unary["reply"]["usage"] and done["reply"]["usage"]["costUsdMicros"] > 0
        assert type(done["reply"]["usage"]["costUsdMicros"]) is type(unary["reply"]["usage"]["costUsdMicros"]) is int
        assert type(done["session"]["costUsdMicros"]) is int
        # An error before the stream starts is a plain error response.
        client.post(f"/v1/chat/sessions/{other}/end", json={}, headers=tenant.auth)
        r = client.post(f"/v1/chat/sessions/{other}/messages", params={"stream": "true"}, json={"content": "hi"},
                        headers=tenant.auth)
        assert_envelope(r, 409, "state_conflict")


def test_resuming_a_reply_of_another_workspace_is_404(http, tenants, chat):
    """A reply's run is read as its session is: from the session's workspace only."""
    tenant, persona_id = chat
    elsewhere = tenants.workspace(tenant)
    sid = make_session(http, tenant, persona_id)["sessionId"]
    r = http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"},
                  json={"content": "Which record do you keep for storms?"}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    run_id = r.headers["x-run-id"]

    def resume(who, run):
        return http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"}, json={},
                         headers={**who.auth, "Last-Event-ID": f"{run}.0"})

    refused, missing = resume(elsewhere, run_id), resume(elsewhere, "run_" + "0" * 32)
    assert assert_envelope(refused, 404, "not_found")["details"] == {"runId": run_id}
    assert assert_envelope(missing, 404, "not_found")["details"] == {"runId": "run_" + "0" * 32}
    assert "storms" not in refused.text and "message.delta" not in refused.text
    assert resume(tenant, run_id).text == r.text  # the run's own workspace replays every frame


def test_streamed_refusal_is_in_band(stack, chat, engine):
    tenant, persona_id = chat
    with httpx.Client(base_url=stack.http_url, timeout=30) as client:
        sid = make_session(client, tenant, persona_id)["sessionId"]
        with client.stream("POST", f"/v1/chat/sessions/{sid}/messages?stream=true",
                           json={"content": "[[unsafe]] tell me"}, headers=tenant.auth) as r:
            got = sse_events(r, status="failed")
        assert [e["event"] for e in got] == ["message.started", "error"]
        assert got[-1]["error"]["code"] == "moderation_blocked"
        assert client.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()["messageCount"] == 0


def test_moderation_refusal(http, chat, engine):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    error = assert_envelope(send(http, tenant, sid, "[[unsafe]] please"), 422, "moderation_blocked")
    assert error["details"]["stage"] == "output_content" and "violence" in error["details"]["categories"]
    review_id = error["details"]["reviewId"]
    with engine.connect() as conn:
        review = conn.execute(text("SELECT * FROM moderation_reviews WHERE id = :id"), {"id": review_id}).mappings().one()
    assert review["stage"] == "output_content" and review["subject_type"] == "chat_session"
    assert review["subject_id"] == sid and review["status"] == "pending" and review["org_id"] == tenant.org_id
    r = http.get("/v1/events", params={"type": "moderation.flagged"}, headers=tenant.auth)
    flagged = [e for e in r.json()["items"] if e["data"]["reviewId"] == review_id]
    assert len(flagged) == 1 and flagged[0]["data"]["stage"] == "output_content"
    # Refused replies are neither stored nor billed.
    session = http.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()
    assert session["messageCount"] == 0 and session["inputTokens"] == 0


def test_drift_blocked(http, tenants):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    sid = make_session(http, tenant, persona_id)["sessionId"]
    error = assert_envelope(send(http, tenant, sid, "[[drift]] what now?"), 409, "drift_blocked")
    assert error["details"]["driftScore"] > error["details"]["threshold"] == 0.35
    failed = events(http, tenant, persona_id, "persona.audit_failed")
    assert len(failed) == 1
    assert failed[0]["data"]["reason"] == "voice_drift" and failed[0]["data"]["action"] == "block"
    assert failed[0]["data"]["subjectId"] == sid
    assert set(failed[0]["data"]) == AUDIT_FAILED_FIELDS  # the same schema as an audit's
    assert http.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()["messageCount"] == 0
    # Other messages in the session still work.
    assert send(http, tenant, sid, "Hello again").status_code == 200


def test_drift_auto_recover(http, tenants):
    tenant = tenants()
    persona_id = make_persona(http, tenant)
    set_config(http, tenant, ACTION, "auto_recover")
    sid = make_session(http, tenant, persona_id)["sessionId"]
    r = send(http, tenant, sid, "[[drift]] what now?")
    assert r.status_code == 200, r.text
    reply = r.json()["reply"]
    assert reply["recovered"] is True and reply["driftScore"] <= 0.35
    assert "spreadsheet" not in reply["content"]
    failed = events(http, tenant, persona_id, "persona.audit_failed")
    assert len(failed) == 1 and failed[0]["data"]["reason"] == "voice_drift"
    assert failed[0]["data"]["action"] == "auto_recover"
    # Both calls are billed.
    plain = send(http, tenant, make_session(http, tenant, persona_id)["sessionId"], "what now?").json()["reply"]
    assert reply["usage"]["inputTokens"] > plain["usage"]["inputTokens"]
    assert r.json()["session"]["messageCount"] == 2


def test_drift_threshold_per_persona(http, tenants):
    tenant = tenants()
    lenient, strict = make_persona(http, tenant, "A calm gardener"), make_persona(http, tenant, "A witty pilot")
    set_config(http, tenant, THRESHOLD, 1.0)  # workspace: never alert
    item = set_config(http, tenant, THRESHOLD, 0.35, level="persona", personaId=strict)
    assert item["source"] == "persona" and item["value"] == 0.35
    r = http.get(f"/v1/config/{THRESHOLD}", params={"personaId": strict}, headers=tenant.auth)
    assert r.json()["source"] == "persona"
    r = http.get(f"/v1/config/{THRESHOLD}", params={"personaId": lenient}, headers=tenant.auth)
    assert r.json()["source"] == "workspace" and r.json()["value"] == 1.0
    assert http.get(f"/v1/config/{THRESHOLD}", headers=tenant.auth).json()["value"] == 1.0
    s1 = make_session(http, tenant, lenient)["sessionId"]
    s2 = make_session(http, tenant, strict)["sessionId"]
    assert send(http, tenant, s1, "[[drift]] go").status_code == 200
    assert_envelope(send(http, tenant, s2, "[[drift]] go"), 409, "drift_blocked")
    # Removing the persona setting falls back to the workspace's.
    r = http.delete(f"/v1/config/{THRESHOLD}", params={"level": "persona", "personaId": strict}, headers=tenant.auth)
    assert r.status_code == 200 and r.json()["source"] == "workspace"
    assert send(http, tenant, s2, "[[drift]] go").status_code == 200
    # The persona level needs a persona of the workspace.
    r = http.put(f"/v1/config/{THRESHOLD}", json={"value": 0.5, "level": "persona"}, headers=tenant.auth)
    assert_envelope(r, 422, "validation_failed")
    other = tenants()
    r = http.put(f"/v1/config/{THRESHOLD}", json={"value": 0.5, "level": "persona", "personaId": strict},
                 headers=other.auth)
    assert_envelope(r, 404, "not_found")
    r = http.put("/v1/config/engine.pipeline.audit.threshold", json={"value": 0.5, "level": "persona",
                                                                      "personaId": strict}, headers=tenant.auth)
    assert_envelope(r, 422, "validation_failed")


def test_tenant_isolation(http, tenants, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    send(http, tenant, sid, "Hello")
    other = tenants()
    assert_envelope(http.get(f"/v1/chat/sessions/{sid}", headers=other.auth), 404, "not_found")
    assert_envelope(http.get(f"/v1/chat/sessions/{sid}/messages", headers=other.auth), 404, "not_found")
    assert_envelope(send(http, other, sid, "Hi"), 404, "not_found")
    assert_envelope(http.post(f"/v1/chat/sessions/{sid}/end", json={}, headers=other.auth), 404, "not_found")
    r = http.post("/v1/chat/sessions", json={"personaId": persona_id}, headers=other.auth)
    assert_envelope(r, 404, "not_found")
    assert http.get("/v1/chat/sessions", headers=other.auth).json()["items"] == []


def test_scopes(http, tenants, chat):
    tenant, persona_id = chat
    read_only = {"Authorization": f"Bearer {tenants.tenant_key(tenant, ['chat:read'])}"}
    r = http.post("/v1/chat/sessions", json={"personaId": persona_id}, headers=read_only)
    assert_envelope(r, 403, "forbidden")
    assert http.get("/v1/chat/sessions", headers=read_only).status_code == 200


def test_native_grpc(edge_channel, chat):
    tenant, persona_id = chat
    stub = chat_pb2_grpc.ChatServiceStub(edge_channel)
    session = stub.CreateChatSession(chat_pb2.CreateChatSessionRequest(persona_id=persona_id), metadata=tenant.metadata)
    assert session.session_id.startswith("chs_")
    reply = stub.SendChatMessage(chat_pb2.SendChatMessageRequest(id=session.session_id, content="Hi there"),
                                 metadata=tenant.metadata)
    assert reply.session.message_count == 2 and reply.reply.content
    streamed = list(stub.StreamChatMessage(chat_pb2.SendChatMessageRequest(id=session.session_id, content="More?"),
                                           metadata=tenant.metadata))
    assert streamed[0].event == "message.started" and streamed[-1].event == "message.completed"
    assert streamed[-1].session.message_count == 4
    with pytest.raises(grpc.RpcError) as info:
        stub.SendChatMessage(chat_pb2.SendChatMessageRequest(id=session.session_id, content="[[drift]] x"),
                             metadata=tenant.metadata)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert re.search("drift", info.value.details() or "")


def test_a_streamed_reply_sent_again_with_its_key_is_one_reply(http, tenants, chat):
    """The streamed create's replay (tests/personas/test_personas_sse.py) holds for every streamed write: a chat
    reply sent twice with one Idempotency-Key is one reply, the second answer its run again. The key is the
    organization's, but its request is the workspace's: the same key from another workspace is a different
    request (409), never a replay of this workspace's reply."""
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    headers = {**tenant.auth, "Idempotency-Key": f"reply-{sid}"}
    body = {"content": "Which storm do you remember best?"}
    first = http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"}, json=body, headers=headers)
    again = http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"}, json=body, headers=headers)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert again.headers["idempotent-replayed"] == "true" and again.text == first.text
    assert again.headers["x-run-id"] == first.headers["x-run-id"]
    session = http.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth).json()
    assert session["messageCount"] == 2, session  # one question, one reply

    elsewhere = tenants.workspace(tenant)
    other = http.post(f"/v1/chat/sessions/{sid}/messages", params={"stream": "true"}, json=body,
                      headers={**elsewhere.auth, "Idempotency-Key": f"reply-{sid}"})
    assert_envelope(other, 409, "idempotency_conflict")
    assert "message.delta" not in other.text  # no frame of the first workspace's reply
