"""Chat controls over HTTP/JSON through Envoy (server/persona_service/chat/controls.py):
regenerating the last reply keeps its alternatives and one is chosen, editing or
deleting a message removes the later ones (their usage stays billed), per-message
`temperature` and `maxTokens` within bounds (422 naming the field; completions too, as 400 like OpenAI),
and the preview of a message, which spends nothing."""

from __future__ import annotations

import pytest
from support import assert_envelope
from test_chat_http import make_persona, make_session, send


def messages(http, tenant, sid) -> list[dict]:
    r = http.get(f"/v1/chat/sessions/{sid}/messages", params={"limit": 100}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()["items"]


def session_of(http, tenant, sid) -> dict:
    r = http.get(f"/v1/chat/sessions/{sid}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def regenerate(http, tenant, sid, message_id, **body):
    return http.post(f"/v1/chat/sessions/{sid}/messages/{message_id}/regenerate", json=body, headers=tenant.auth)


def choose(http, tenant, sid, message_id, index):
    return http.post(f"/v1/chat/sessions/{sid}/messages/{message_id}/choose", json={"swipeIndex": index},
                     headers=tenant.auth)


@pytest.fixture(scope="module")
def chat(http, tenants):
    tenant = tenants()
    return tenant, make_persona(http, tenant)


def test_regenerate_keeps_the_alternatives_and_one_is_chosen(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    first = send(http, tenant, sid, "What do you love about jazz?").json()
    reply = first["reply"]
    assert (reply["swipeIndex"], reply["swipeCount"], reply["edited"]) == (0, 1, False)

    r = regenerate(http, tenant, sid, reply["id"], temperature=1.5)
    assert r.status_code == 200, r.text
    body = r.json()
    second = body["reply"]
    assert second["id"] != reply["id"] and second["ordinal"] == reply["ordinal"]
    assert (second["swipeIndex"], second["swipeCount"]) == (1, 2)
    assert body["userMessage"]["id"] == first["userMessage"]["id"]
    # One turn, more alternatives: the count stays, the usage grows by the new reply's.
    usage = second["usage"]
    assert body["session"]["messageCount"] == 2
    assert body["session"]["costUsdMicros"] == first["session"]["costUsdMicros"] + usage["costUsdMicros"]
    assert body["session"]["inputTokens"] == first["session"]["inputTokens"] + usage["inputTokens"]

    listed = messages(http, tenant, sid)
    assert [m["id"] for m in listed] == [first["userMessage"]["id"], second["id"]]

    # Back to the first alternative: listed (and sent to the model) from now on.
    r = choose(http, tenant, sid, second["id"], 0)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == reply["id"] and r.json()["content"] == reply["content"]
    assert (r.json()["swipeIndex"], r.json()["swipeCount"]) == (0, 2)
    assert [m["id"] for m in messages(http, tenant, sid)] == [first["userMessage"]["id"], reply["id"]]
    assert session_of(http, tenant, sid)["costUsdMicros"] == body["session"]["costUsdMicros"]  # choosing is free

    assert choose(http, tenant, sid, reply["id"], 1).json()["id"] == second["id"]
    error = assert_envelope(choose(http, tenant, sid, reply["id"], 2), 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "swipeIndex"


def test_only_the_last_message_regenerates_and_alternatives_are_bounded(http, chat, engine):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    first = send(http, tenant, sid, "Hello there.").json()
    send(http, tenant, sid, "Tell me about the sea.")
    error = assert_envelope(regenerate(http, tenant, sid, first["reply"]["id"]), 409, "state_conflict")
    assert error["details"]["conflictField"] == "id"
    assert_envelope(choose(http, tenant, sid, first["reply"]["id"], 0), 409, "state_conflict")
    assert_envelope(regenerate(http, tenant, sid, "msg_doesnotexist"), 404, "not_found")

    last = messages(http, tenant, sid)[-1]
    for _ in range(9):
        assert regenerate(http, tenant, sid, last["id"]).status_code == 200
    error = assert_envelope(regenerate(http, tenant, sid, last["id"]), 409, "state_conflict")
    assert error["details"]["conflictField"] == "swipeCount" and error["details"]["swipeCount"] == 10


def test_editing_a_user_message_removes_the_later_turns_and_regenerate_replies(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    first = send(http, tenant, sid, "Hello there.").json()
    second = send(http, tenant, sid, "Tell me about the sea.").json()
    billed = second["session"]["costUsdMicros"]

    r = http.patch(f"/v1/chat/sessions/{sid}/messages/{first['userMessage']['id']}",
                   json={"content": "Tell me about jazz instead."}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    change = r.json()
    assert change["message"]["content"] == "Tell me about jazz instead." and change["message"]["edited"] is True
    assert change["removedCount"] == 3 and change["session"]["messageCount"] == 1
    assert change["session"]["costUsdMicros"] == billed  # removed replies stay billed
    listed = messages(http, tenant, sid)
    assert [(m["ordinal"], m["content"]) for m in listed] == [(1, "Tell me about jazz instead.")]

    # The edited message, now the last, gets its reply; a later message never reuses an ordinal.
    r = regenerate(http, tenant, sid, first["userMessage"]["id"])
    assert r.status_code == 200, r.text
    assert r.json()["userMessage"]["id"] == first["userMessage"]["id"] and r.json()["session"]["messageCount"] == 2
    third = send(http, tenant, sid, "And the sea?").json()
    ordinals = [m["ordinal"] for m in messages(http, tenant, sid)]
    assert ordinals == sorted(set(ordinals)) and len(ordinals) == 4
    assert third["userMessage"]["ordinal"] > second["reply"]["ordinal"]


def test_editing_a_reply_keeps_it_alone_in_its_turn(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    reply = send(http, tenant, sid, "Hello there.").json()["reply"]
    again = regenerate(http, tenant, sid, reply["id"]).json()["reply"]
    r = http.patch(f"/v1/chat/sessions/{sid}/messages/{again['id']}", json={"content": "Ahoy."}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    edited = r.json()["message"]
    assert (edited["content"], edited["edited"], edited["swipeCount"], edited["swipeIndex"]) == ("Ahoy.", True, 1, 0)
    assert r.json()["removedCount"] == 0 and r.json()["session"]["messageCount"] == 2


def test_delete_removes_the_message_and_what_follows(http, chat, engine):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    first = send(http, tenant, sid, "Hello there.").json()
    second = send(http, tenant, sid, "Tell me about the sea.").json()
    r = http.delete(f"/v1/chat/sessions/{sid}/messages/{second['userMessage']['id']}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert r.json()["removedCount"] == 2 and r.json()["session"]["messageCount"] == 2
    assert "message" not in r.json() or r.json()["message"] is None
    assert [m["id"] for m in messages(http, tenant, sid)] == [first["userMessage"]["id"], first["reply"]["id"]]
    assert_envelope(http.delete(f"/v1/chat/sessions/{sid}/messages/{second['reply']['id']}", headers=tenant.auth),
                    404, "not_found")
    # The next exchange continues from what is left.
    after = send(http, tenant, sid, "Goodbye.").json()
    assert after["session"]["messageCount"] == 4
    assert after["reply"]["usage"]["inputTokens"] < second["reply"]["usage"]["inputTokens"] + 100

    # An ended session's messages cannot change.
    assert http.post(f"/v1/chat/sessions/{sid}/end", json={}, headers=tenant.auth).status_code == 200
    error = assert_envelope(http.delete(f"/v1/chat/sessions/{sid}/messages/{first['reply']['id']}",
                                        headers=tenant.auth), 409, "state_conflict")
    assert error["details"]["conflictField"] == "status"


@pytest.mark.parametrize(("field", "value"), [("temperature", 5), ("temperature", -0.5), ("maxTokens", 0),
                                              ("maxTokens", 9000)])
def test_sampling_bounds_are_422_naming_the_field(http, chat, field, value):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    for path in ("messages", "messages/preview"):
        r = http.post(f"/v1/chat/sessions/{sid}/{path}", json={"content": "Hi", field: value}, headers=tenant.auth)
        error = assert_envelope(r, 422, "validation_failed")
        assert [v["path"] for v in error["details"]["validationErrors"]] == [field]
    assert session_of(http, tenant, sid)["messageCount"] == 0


def test_max_tokens_and_temperature_reach_the_reply(http, chat):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    r = http.post(f"/v1/chat/sessions/{sid}/messages", json={"content": "Tell me a long story about the sea.",
                                                              "temperature": 2, "maxTokens": 3}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert 0 < r.json()["reply"]["usage"]["outputTokens"] <= 3


def test_completions_bound_temperature(http, chat):
    tenant, persona_id = chat
    body = {"model": f"persona://{persona_id}", "messages": [{"role": "user", "content": "Hi"}]}
    error = assert_envelope(http.post("/v1/chat/completions", json={**body, "temperature": 5}, headers=tenant.auth),
                            400, "validation_failed")  # OpenAI's status there
    assert error["details"]["validationErrors"][0]["path"] == "temperature"
    assert http.post("/v1/chat/completions", json={**body, "temperature": 2}, headers=tenant.auth).status_code == 200


def test_preview_estimates_and_spends_nothing(http, chat, engine):
    tenant, persona_id = chat
    sid = make_session(http, tenant, persona_id)["sessionId"]
    send(http, tenant, sid, "Hello there.")
    before = session_of(http, tenant, sid)
    events = http.get("/v1/events", params={"limit": 100}, headers=tenant.auth).json()["items"]
    content = "What do you love about jazz?"
    r = http.post(f"/v1/chat/sessions/{sid}/messages/preview", json={"content": content}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["model"] == "local-persona-1" and preview["outputTokens"] > 0
    quota = {q["name"]: q for q in preview["quota"]}
    assert quota["chat.messages"] == {"name": "chat.messages", "units": 1, "limit": 600, "windowSeconds": 60}
    assert quota["generations_per_month"]["units"] == 0
    # Nothing spent: no message, no usage, no event.
    assert session_of(http, tenant, sid) == before
    assert len(messages(http, tenant, sid)) == 2
    assert http.get("/v1/events", params={"limit": 100}, headers=tenant.auth).json()["items"] == events
    # The input estimate is what the message then costs on the built-in model.
    sent = send(http, tenant, sid, content).json()["reply"]["usage"]
    assert preview["inputTokens"] == sent["inputTokens"]
    capped = http.post(f"/v1/chat/sessions/{sid}/messages/preview", json={"content": content, "maxTokens": 2},
                       headers=tenant.auth).json()
    assert capped["outputTokens"] == 2 and capped["costUsdMicros"] < preview["costUsdMicros"] + sent["costUsdMicros"]
    assert_envelope(http.post("/v1/chat/sessions/chs_missing/messages/preview", json={"content": "x"},
                              headers=tenant.auth), 404, "not_found")
