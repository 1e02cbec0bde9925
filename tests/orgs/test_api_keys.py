"""API keys over HTTP/JSON through Envoy: the lifecycle (create, list, get,
revoke), pagination, scope and plan rules, IP allowlists, session JWTs; and
the chat session read model's JSON shape."""

from __future__ import annotations

import base64
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from persona_service.chat.tables import ChatSession
from persona_service.kernel import ids
from persona_service.kernel.data.work import Work
from persona_service.orgs.keys import KeyService
from sqlalchemy import insert
from support import assert_envelope

SCOPES = ["personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write"]
# `expiresAt` and `revokedAt` are always there: `null` until set (a not-yet timestamp).
KEY_FIELDS = {"id", "name", "scopes", "mode", "prefix", "ipAllowlist", "workspaceId", "createdAt", "expiresAt",
              "revokedAt"}
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def rfc3339(value) -> datetime:
    assert isinstance(value, str) and RFC3339.match(value), value
    return datetime.fromisoformat(value)


def create_key(http, auth, **body) -> dict:
    body.setdefault("name", "key")
    body.setdefault("scopes", ["chat:read"])
    response = http.post("/v1/keys", headers=auth, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def walk(http, auth, limit: int = 1) -> list[dict]:
    """Every key, following nextCursor until it is empty."""
    keys, token, pages = [], "", 0
    while True:
        params = {"limit": limit, **({"cursor": token} if token else {})}
        response = http.get("/v1/keys", params=params, headers=auth)
        assert response.status_code == 200, response.text
        page = response.json()
        assert set(page) == {"items", "nextCursor"}
        assert len(page["items"]) <= limit
        keys += page["items"]
        token = page["nextCursor"]
        pages += 1
        assert pages < 100, "pagination does not terminate"
        if not token:
            return keys


def org_of(http, tenant, secret: str):
    return http.get(f"/v1/orgs/{tenant.org_id}", headers=bearer(secret))


# --- creation -------------------------------------------------------------------


@pytest.mark.parametrize("mode,prefix", [(None, "sk_live_"), ("live", "sk_live_"), ("test", "sk_test_")])
def test_create_shows_secret_once(http, tenant, mode, prefix):
    body = {"name": "ci deploy", "scopes": ["chat:read", "personas:read"]}
    if mode:
        body["mode"] = mode
    created = create_key(http, tenant.auth, **body)
    assert set(created) == {"key", "secret"}
    secret, key = created["secret"], created["key"]
    assert secret.startswith(prefix) and len(secret) > len(prefix) + 20
    assert set(key) == KEY_FIELDS
    assert key["id"].startswith("key_")
    assert key["name"] == "ci deploy"
    assert key["scopes"] == ["personas:read", "chat:read"]  # canonical order
    assert key["mode"] == (mode or "live")
    assert secret.startswith(key["prefix"]) and key["prefix"].startswith(prefix)
    assert key["workspaceId"] == tenant.workspace_id
    assert key["ipAllowlist"] == []
    rfc3339(key["createdAt"])
    # The secret works, and is never shown again.
    assert org_of(http, tenant, secret).status_code == 200
    fetched = http.get(f"/v1/keys/{key['id']}", headers=tenant.auth)
    assert fetched.status_code == 200, fetched.text
    assert fetched.json() == key
    assert secret not in fetched.text


def test_create_with_expiry(http, tenant):
    expires = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    created = create_key(http, tenant.auth, expiresAt=expires.isoformat().replace("+00:00", "Z"))
    assert rfc3339(created["key"]["expiresAt"]) == expires
    assert org_of(http, tenant, created["secret"]).status_code == 200


def test_list_never_shows_secrets(http, tenants):
    tenant = tenants()
    secrets = [create_key(http, tenant.auth, name=f"k{i}")["secret"] for i in range(2)]
    response = http.get("/v1/keys", headers=tenant.auth)
    assert response.status_code == 200, response.text
    for key in response.json()["items"]:
        assert set(key) == KEY_FIELDS
    for secret in [tenant.api_key, *secrets]:
        assert secret not in response.text
        assert secret[12:] not in response.text


def test_session_jwt_of_owner_can_create_keys(http, tenant, jwt_minter):
    token = jwt_minter.mint_session(tenant.user_id, tenant.org_id, tenant.workspace_id)
    created = create_key(http, bearer(token), name="from dashboard", scopes=SCOPES)
    assert created["key"]["scopes"] == SCOPES
    assert created["key"]["workspaceId"] == tenant.workspace_id
    assert org_of(http, tenant, created["secret"]).status_code == 200


def test_key_cannot_grant_scopes_its_creator_lacks(http, tenants, tenant):
    limited = tenants.tenant_key(tenant, ["config:read", "config:write"])
    response = http.post("/v1/keys", headers=bearer(limited), json={"name": "escalate", "scopes": ["config:read", "chat:read"]})
    error = assert_envelope(response, 403, "forbidden")
    assert error["details"] == {"scopes": ["chat:read"]}
    # Within its own scopes it may.
    create_key(http, bearer(limited), name="fine", scopes=["config:read"])


# --- pagination -----------------------------------------------------------------


def test_pagination_walks_every_key_exactly_once(http, tenants):
    tenant = tenants()
    for i in range(4):
        create_key(http, tenant.auth, name=f"page {i}")
    everything = http.get("/v1/keys", params={"limit": 100}, headers=tenant.auth).json()
    assert everything["nextCursor"] == ""
    assert len(everything["items"]) == 5  # the fixture key + 4
    walked = walk(http, tenant.auth, limit=1)
    assert [k["id"] for k in walked] == [k["id"] for k in everything["items"]]
    assert len({k["id"] for k in walked}) == 5
    # Newest first.
    created = [rfc3339(k["createdAt"]) for k in walked]
    assert created == sorted(created, reverse=True)


def test_pagination_with_keys_created_in_one_transaction(http, tenants, engine):
    """Keys made together share created_at; the keyset must break the tie on id."""
    tenant = tenants()
    with engine.begin() as conn:
        for i in range(3):
            KeyService(Work.on(conn)).create(
                None, org_id=tenant.org_id, workspace_id=tenant.workspace_id, user_id=tenant.user_id,
                plan=tenant.plan, name=f"batch {i}", scopes=["chat:read"],
            )
    everything = http.get("/v1/keys", params={"limit": 100}, headers=tenant.auth).json()["items"]
    assert len(everything) == 4
    walked = walk(http, tenant.auth, limit=1)
    assert sorted(k["name"] for k in walked) == sorted(k["name"] for k in everything), "keys skipped or repeated"
    assert [k["id"] for k in walked] == [k["id"] for k in everything]


def test_default_limit_is_20(http, tenants, engine):
    tenant = tenants()
    with engine.begin() as conn:
        for i in range(21):
            KeyService(Work.on(conn)).create(
                None, org_id=tenant.org_id, workspace_id=tenant.workspace_id, user_id=tenant.user_id,
                plan=tenant.plan, name=f"bulk {i}", scopes=["chat:read"],
            )
    page = http.get("/v1/keys", headers=tenant.auth).json()
    assert len(page["items"]) == 20 and page["nextCursor"]


def _flip(char: str) -> str:
    return "A" if char != "A" else "B"


@pytest.fixture(scope="module")
def cursor(http, tenant) -> str:
    create_key(http, tenant.auth, name="for the cursor")
    token = http.get("/v1/keys", params={"limit": 1}, headers=tenant.auth).json()["nextCursor"]
    assert token
    return token


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda t: t[:-1] + _flip(t[-1]), id="mac-changed"),
        pytest.param(lambda t: _flip(t[0]) + t[1:], id="payload-changed"),
        pytest.param(lambda t: t[: len(t) // 2], id="truncated"),
        pytest.param(lambda t: t.split(".")[0], id="mac-missing"),
        pytest.param(lambda t: "abc.def", id="garbage"),
        pytest.param(lambda t: "not-a-cursor", id="no-dot"),
        pytest.param(lambda t: "!!!.???", id="not-base64"),
        pytest.param(
            lambda t: base64.urlsafe_b64encode(b'{"s":"keys:ws_x","p":["2020-01-01T00:00:00+00:00","key_x"]}').decode() + ".x",
            id="forged-payload",
        ),
        pytest.param(lambda t: "abc.\u00e9", id="non-ascii-mac"),
        pytest.param(lambda t: t.split(".")[0] + ".\u00e9\u00e9", id="non-ascii-mac-real-payload"),
    ],
)
def test_tampered_cursor_is_bad_request(http, tenant, cursor, tamper):
    response = http.get("/v1/keys", params={"limit": 1, "cursor": tamper(cursor)}, headers=tenant.auth)
    error = assert_envelope(response, 400, "bad_request")
    assert error["details"] == {"parameter": "cursor"}


def test_cursor_of_another_workspace_is_bad_request(http, tenant, tenants, cursor):
    other = tenants()
    response = http.get("/v1/keys", params={"limit": 1, "cursor": cursor}, headers=other.auth)
    error = assert_envelope(response, 400, "bad_request")
    assert error["details"] == {"parameter": "cursor"}


@pytest.mark.parametrize("size,code,expected", [(1000, "maximum", {"maximum": 100}), (101, "maximum", {"maximum": 100}),
                                               (0, "minimum", {"minimum": 1}), (-1, "minimum", {"minimum": 1})])
def test_limit_out_of_range_is_422(http, tenant, size, code, expected):
    response = http.get("/v1/keys", params={"limit": size}, headers=tenant.auth)
    error = assert_envelope(response, 422, "validation_failed")
    assert error["details"] == {"validationErrors": [{"path": "limit", "code": code, "value": size, "expected": expected}]}


# --- tenancy ----------------------------------------------------------------------


def test_get_key_of_another_tenant_is_404(http, tenants, tenant):
    other = tenants()
    theirs = create_key(http, other.auth, name="theirs")["key"]["id"]
    foreign = http.get(f"/v1/keys/{theirs}", headers=tenant.auth)
    missing = http.get(f"/v1/keys/{ids.new_id('api_key')}", headers=tenant.auth)
    assert_envelope(foreign, 404, "not_found")
    assert_envelope(missing, 404, "not_found")
    assert foreign.json() == missing.json()
    assert theirs not in foreign.text


def test_revoke_key_of_another_tenant_is_404_and_leaves_it_working(http, tenants, tenant):
    other = tenants()
    theirs = create_key(http, other.auth, name="theirs")
    response = http.post(f"/v1/keys/{theirs['key']['id']}/revoke", headers=tenant.auth, json={})
    assert_envelope(response, 404, "not_found")
    assert org_of(http, other, theirs["secret"]).status_code == 200


# --- revocation ----------------------------------------------------------------------


def test_revoke_then_401_and_revoked_at_shown(http, tenants):
    tenant = tenants()
    created = create_key(http, tenant.auth, name="short lived")
    key_id, secret = created["key"]["id"], created["secret"]
    assert org_of(http, tenant, secret).status_code == 200  # cached by the server now

    revoked = http.post(f"/v1/keys/{key_id}/revoke", headers=tenant.auth, json={})
    assert revoked.status_code == 200, revoked.text
    revoked_at = rfc3339(revoked.json()["revokedAt"])
    assert abs(revoked_at - datetime.now(UTC)) < timedelta(minutes=1)
    assert set(revoked.json()) == KEY_FIELDS

    assert_envelope(org_of(http, tenant, secret), 401, "unauthorized")

    assert http.get(f"/v1/keys/{key_id}", headers=tenant.auth).json()["revokedAt"] == revoked.json()["revokedAt"]
    listed = {k["id"]: k for k in walk(http, tenant.auth, limit=100)}
    assert listed[key_id]["revokedAt"] == revoked.json()["revokedAt"]
    assert all(k["revokedAt"] is None for k in listed.values() if k["id"] != key_id)

    # Revoking again answers the key unchanged.
    again = http.post(f"/v1/keys/{key_id}/revoke", headers=tenant.auth, json={})
    assert again.status_code == 200, again.text
    assert again.json() == revoked.json()


def test_revoke_by_session_jwt(http, tenants, jwt_minter):
    tenant = tenants()
    created = create_key(http, tenant.auth)
    token = jwt_minter.mint_session(tenant.user_id, tenant.org_id, tenant.workspace_id)
    response = http.post(f"/v1/keys/{created['key']['id']}/revoke", headers=bearer(token), json={})
    assert response.status_code == 200, response.text
    assert_envelope(org_of(http, tenant, created["secret"]), 401, "unauthorized")


# --- IP allowlists ----------------------------------------------------------------------


def test_ip_allowlist_requires_enterprise(http, tenant):
    response = http.post("/v1/keys", headers=tenant.auth, json={"name": "ip", "scopes": ["chat:read"], "ipAllowlist": ["10.0.0.0/8"]})
    error = assert_envelope(response, 403, "forbidden")
    assert error["details"] == {"requiredPlan": "enterprise"}


@pytest.fixture(scope="module")
def enterprise(tenants):
    return tenants(plan="enterprise")


def test_ip_allowlist_refuses_other_addresses(http, enterprise):
    created = create_key(http, enterprise.auth, name="office only", ipAllowlist=["10.9.9.0/24"])
    assert created["key"]["ipAllowlist"] == ["10.9.9.0/24"]
    # This client calls from 127.0.0.1.
    assert_envelope(org_of(http, enterprise, created["secret"]), 403, "forbidden")
    # A forged X-Forwarded-For does not help.
    spoofed = http.get(
        f"/v1/orgs/{enterprise.org_id}", headers={**bearer(created["secret"]), "X-Forwarded-For": "10.9.9.9"}
    )
    assert_envelope(spoofed, 403, "forbidden")


def test_ip_allowlist_admits_the_listed_address(http, enterprise):
    created = create_key(http, enterprise.auth, name="loopback", ipAllowlist=["127.0.0.1/32"])
    assert created["key"]["ipAllowlist"] == ["127.0.0.1/32"]
    response = org_of(http, enterprise, created["secret"])
    assert response.status_code == 200, f"a key allowlisted for 127.0.0.1 was refused from 127.0.0.1: {response.text}"


# --- chat session JSON shape ------------------------------------------------------------

CHAT_FIELDS = {
    "sessionId": str, "orgId": str, "workspaceId": str, "personaId": str, "userId": str, "title": str,
    "status": str, "messageCount": int, "inputTokens": int, "outputTokens": int, "costUsdMicros": (int, float),
    "startedAt": str, "lastActiveAt": str, "endedAt": (str, type(None)),
    "personaVersion": int,  # beyond the spec's fourteen: the pinned persona version, 0 when not pinned (#41)
    "unpricedReplies": int,  # beyond them too: replies whose model had no price, left out of costUsdMicros (#48)
}


def insert_session(engine, tenant, **values) -> dict:
    row = dict(
        id=ids.new_id("chat_session"), org_id=tenant.org_id, workspace_id=tenant.workspace_id,
        persona_id=str(uuid.uuid4()), user_id="customer-user-42", title="Onboarding chat",
    )
    row.update(values)
    with engine.begin() as conn:
        conn.execute(insert(ChatSession).values(**row))
    return row


def get_session(http, tenant, session_id) -> dict:
    response = http.get(f"/v1/chat/sessions/{session_id}", headers=tenant.auth)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == set(CHAT_FIELDS), set(body) ^ set(CHAT_FIELDS)
    for name, kind in CHAT_FIELDS.items():
        assert isinstance(body[name], kind) and not isinstance(body[name], bool), (name, body[name])
    return body


def test_chat_session_active_has_all_fourteen_fields(http, engine, tenant):
    row = insert_session(
        engine, tenant, message_count=7, input_tokens=1234, output_tokens=5678, cost_usd_micros=4_200_000,
    )
    body = get_session(http, tenant, row["id"])
    assert body["sessionId"] == row["id"]
    assert body["orgId"] == tenant.org_id
    assert body["workspaceId"] == tenant.workspace_id
    assert body["personaId"] == row["persona_id"]
    assert body["userId"] == "customer-user-42"
    assert body["title"] == "Onboarding chat"
    assert body["status"] == "active"
    assert body["messageCount"] == 7
    assert body["inputTokens"] == 1234
    assert body["outputTokens"] == 5678
    assert body["costUsdMicros"] == 4_200_000
    assert rfc3339(body["startedAt"]) <= rfc3339(body["lastActiveAt"])
    assert body["endedAt"] is None


def test_chat_session_zero_counters_are_present_as_numbers(http, engine, tenant):
    body = get_session(http, tenant, insert_session(engine, tenant, title="")["id"])
    assert (body["messageCount"], body["inputTokens"], body["outputTokens"], body["costUsdMicros"]) == (0, 0, 0, 0)
    assert body["title"] == ""


def test_chat_session_ended_has_rfc3339_ended_at(http, engine, tenant):
    started = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    ended = started + timedelta(minutes=30)
    row = insert_session(
        engine, tenant, status="ended", started_at=started, last_active_at=ended - timedelta(seconds=5), ended_at=ended,
    )
    body = get_session(http, tenant, row["id"])
    assert body["status"] == "ended"
    assert rfc3339(body["startedAt"]) == started
    assert rfc3339(body["lastActiveAt"]) == ended - timedelta(seconds=5)
    assert rfc3339(body["endedAt"]) == ended


def test_chat_session_large_cost_is_a_json_number(http, engine, tenant):
    # Beyond 2^31 (int64 fields would print as strings in JSON).
    body = get_session(http, tenant, insert_session(engine, tenant, status="archived", cost_usd_micros=3 * 2**40)["id"])
    assert body["status"] == "archived"
    assert body["costUsdMicros"] == 3 * 2**40
