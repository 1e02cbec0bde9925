"""The audit log over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/audit.py and the pipeline's audit stage):
writes, authentication and authorization failures are recorded with who,
what, the outcome and the request id; GET /v1/audit/events filters,
paginates with tamper-evident cursors and is tenant-scoped."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from persona_service.kernel.transport.auth import hash_secret
from sqlalchemy import text
from support import assert_envelope

EVENTS = "/v1/audit/events"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def key_id_of(engine, secret: str) -> str:
    with engine.connect() as conn:
        return conn.execute(text("SELECT id FROM api_keys WHERE secret_hash = :h"), {"h": hash_secret(secret)}).scalar_one()


def events(http, tenant, **params) -> list[dict]:
    r = http.get(EVENTS, params={"limit": 100, **params}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json().get("items", [])


@dataclass
class Story:
    owner_key_id: str
    create_request_id: str
    new_key_id: str
    revoked_key_id: str
    unauthorized_request_id: str
    limited_key_id: str
    forbidden_request_id: str


@pytest.fixture(scope="module")
def org(tenants):
    return tenants()


@pytest.fixture(scope="module")
def story(http, engine, tenants, org) -> Story:
    """A successful write, a 401 with a revoked key and a 403 for a missing scope."""
    created = http.post("/v1/keys", json={"name": "audited", "scopes": ["config:read"]}, headers=org.auth)
    assert created.status_code == 200, created.text
    new_key = created.json()

    assert http.get("/v1/keys", headers=bearer(new_key["secret"])).status_code == 200  # now cached
    revoked = http.post(f"/v1/keys/{new_key['key']['id']}/revoke", json={}, headers=org.auth)
    assert revoked.status_code == 200, revoked.text
    refused = http.get("/v1/keys", headers=bearer(new_key["secret"]))
    assert_envelope(refused, 401, "unauthorized")

    limited = tenants.tenant_key(org, ["personas:read"])
    forbidden = http.post("/v1/keys", json={"name": "nope", "scopes": ["personas:read"]}, headers=bearer(limited))
    assert_envelope(forbidden, 403, "forbidden")

    return Story(
        owner_key_id=key_id_of(engine, org.api_key),
        create_request_id=created.headers["x-request-id"],
        new_key_id=new_key["key"]["id"],
        revoked_key_id=new_key["key"]["id"],
        unauthorized_request_id=refused.headers["x-request-id"],
        limited_key_id=key_id_of(engine, limited),
        forbidden_request_id=forbidden.headers["x-request-id"],
    )


def only(found: list[dict]) -> dict:
    assert len(found) == 1, found
    return found[0]


def test_a_successful_write_is_recorded(http, org, story):
    event = only(events(http, org, requestId=story.create_request_id))
    assert event["action"] == "api_key.create"
    assert event["outcome"] == "success"
    assert event["status"] == 200
    assert event["requestId"] == story.create_request_id
    assert event["orgId"] == org.org_id
    assert event["workspaceId"] == org.workspace_id
    assert event["credentialId"] == story.owner_key_id
    assert event["actorUserId"] == org.user_id
    assert event["resourceType"] == "api_key"
    assert event["resourceId"] == story.new_key_id
    assert event["id"].startswith("aud_")
    assert event["occurredAt"].endswith("Z")
    assert not event.get("errorCode")


def test_a_revoked_key_records_an_authentication_failure(http, org, story):
    event = only(events(http, org, requestId=story.unauthorized_request_id))
    assert event["action"] == "auth.authenticate"
    assert event["outcome"] == "failure"
    assert event["status"] == 401
    assert event["errorCode"] == "unauthorized"
    assert event["orgId"] == org.org_id
    assert event["credentialId"] == story.revoked_key_id


def test_a_missing_scope_records_an_authorization_failure(http, org, story):
    event = only(events(http, org, requestId=story.forbidden_request_id))
    assert event["action"] == "api_key.create"
    assert event["outcome"] == "failure"
    assert event["status"] == 403
    assert event["errorCode"] == "forbidden"
    assert event["credentialId"] == story.limited_key_id
    assert event["actorUserId"] == org.user_id


@pytest.mark.parametrize(
    "param, field, value",
    [
        ("action", "action", "api_key.create"),
        ("outcome", "outcome", "failure"),
        ("outcome", "outcome", "success"),
        ("actorUserId", "actorUserId", "user"),
        ("credentialId", "credentialId", "limited"),
        ("resourceType", "resourceType", "api_key"),
        ("resourceId", "resourceId", "new_key"),
        ("requestId", "requestId", "create"),
    ],
)
def test_filters(http, org, story, param, field, value):
    value = {
        "user": org.user_id, "limited": story.limited_key_id, "new_key": story.new_key_id,
        "create": story.create_request_id,
    }.get(value, value)
    everything = events(http, org)
    expected = [e["id"] for e in everything if e.get(field) == value]
    assert expected, f"the story has no event with {field}={value}"
    found = events(http, org, **{param: value})
    assert [e["id"] for e in found] == expected
    assert all(e[field] == value for e in found)


def test_filters_combine_with_and(http, org, story):
    found = events(http, org, action="api_key.create", outcome="failure")
    assert found and all(e["action"] == "api_key.create" and e["outcome"] == "failure" for e in found)
    assert story.forbidden_request_id in {e["requestId"] for e in found}
    assert events(http, org, action="api_key.create", outcome="failure", requestId=story.create_request_id) == []


def test_pagination_walks_every_event_newest_first(http, org, story):
    everything = events(http, org)
    assert len(everything) >= 4
    times = [e["occurredAt"] for e in everything]
    assert times == sorted(times, reverse=True)

    walked, token, pages = [], "", 0
    while True:
        params = {"limit": 1, **({"cursor": token} if token else {})}
        r = http.get(EVENTS, params=params, headers=org.auth)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page.get("items", [])) <= 1
        walked += [e["id"] for e in page.get("items", [])]
        token = page.get("nextCursor", "")
        pages += 1
        assert pages <= len(everything) + 1
        if not token:
            break
    assert walked == [e["id"] for e in everything]


def test_a_tampered_page_token_is_a_bad_request(http, org, tenants, story):
    r = http.get(EVENTS, params={"limit": 1}, headers=org.auth)
    token = r.json()["nextCursor"]
    body, mac = token.split(".", 1)
    flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
    for bad in (f"{flipped}.{mac}", token[:-3], "not-a-token", token + "x"):
        error = assert_envelope(http.get(EVENTS, params={"cursor": bad}, headers=org.auth), 400, "bad_request")
        assert error["details"].get("parameter") == "cursor"
    # A genuine token of another organization's list is refused as well.
    other = tenants()
    assert_envelope(http.get(EVENTS, params={"cursor": token}, headers=other.auth), 400, "bad_request")


def test_page_size_above_100_is_invalid(http, org):
    error = assert_envelope(http.get(EVENTS, params={"limit": 101}, headers=org.auth), 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "limit"


def test_tenant_isolation(http, tenants, org, story):
    other = tenants()
    theirs = events(http, other)
    assert all(e["orgId"] == other.org_id for e in theirs)
    ours = {story.create_request_id, story.unauthorized_request_id, story.forbidden_request_id}
    assert not ours & {e["requestId"] for e in theirs}
    for request_id in ours:
        assert events(http, other, requestId=request_id) == []
    assert events(http, other, credentialId=story.owner_key_id) == []


def test_one_action_has_one_name_whichever_form_ran(http, tenants):
    """A chat message sent in one answer and one streamed are the same action:
    the log names both `chat_session.send` (as a persona created either way is
    `persona.create`), so a filter on the action finds them all."""
    tenant = tenants()
    persona = http.post("/v1/personas", json={"intent": "A patient gardener"}, headers=tenant.auth)
    assert persona.status_code == 200, persona.text
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth)
    assert session.status_code == 200, session.text
    path = f"/v1/chat/sessions/{session.json()['sessionId']}/messages"
    unary = http.post(path, json={"content": "Hello"}, headers=tenant.auth)
    assert unary.status_code == 200, unary.text
    streamed = http.post(path, params={"stream": "true"}, json={"content": "Hello again"},
                         headers={**tenant.auth, "Accept": "text/event-stream"})
    assert streamed.status_code == 200 and "event: end" in streamed.text, streamed.text
    for answer in (unary, streamed):
        event = only(events(http, tenant, requestId=answer.headers["x-request-id"]))
        assert event["action"] == "chat_session.send", event
    assert len(events(http, tenant, action="chat_session.send")) == 2
