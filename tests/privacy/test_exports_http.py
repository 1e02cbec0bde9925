"""Privacy exports through Envoy: a user's export is requested, built by
repeated admin build-one calls until `handled` is false (server processes
also build pending exports every 30 s, so either may build a given one), listed with a
signed URL that downloads a JSON bundle of the 8 tables about that user
only (no secrets); nobody sees another's exports; 503 when the feature is
off; a crashed builder's export is claimable again."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from persona_service.privacy.repository import PrivacyRepository
from support import client_for, make_stack_beside, running

TABLES = {"users", "memberships", "api_keys", "personas", "chat_sessions", "chat_messages", "audit_events",
          "privacy_exports"}
BUILD = "/v1/admin/dsar/build-one"


def build_all(http, admin) -> list[str]:
    built = []
    for _ in range(50):
        r = http.post(BUILD, json={}, headers=admin.auth)
        assert r.status_code == 200, r.text
        if not r.json()["handled"]:
            return built
        built.append(r.json()["exportId"])
    raise AssertionError("build-one kept finding work")


def test_a_users_export_holds_their_data_only(http, tenants):
    admin = tenants(plan="pro", platform_admin=True)
    me, other = tenants(plan="pro"), tenants(plan="pro")
    persona = http.post("/v1/personas", json={"intent": "A meticulous archivist who loves maps"}, headers=me.auth)
    assert persona.status_code == 200, persona.text
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=me.auth).json()
    sent = http.post(f"/v1/chat/sessions/{session['sessionId']}/messages", json={"content": "Hello there"},
                     headers=me.auth)
    assert sent.status_code == 200, sent.text
    # A completion without `user`: stored in the completions session of the key (`openai:<key id>`), theirs too.
    completed = http.post("/v1/chat/completions", json={
        "model": f"persona://{persona.json()['id']}", "messages": [{"role": "user", "content": "Hello"}]},
        headers=me.auth)
    assert completed.status_code == 200, completed.text

    mine = http.post("/v1/privacy/exports", json={}, headers=me.auth)
    assert mine.status_code == 200 and mine.json()["status"] == "pending", mine.text
    again = http.post("/v1/privacy/exports", json={}, headers=me.auth)
    assert again.json()["id"] == mine.json()["id"]  # one open export per user
    theirs = http.post("/v1/privacy/exports", json={}, headers=other.auth).json()

    build_all(http, admin)  # (the servers' own job may have built some of them first)
    assert http.post(BUILD, json={}, headers=admin.auth).json() == {"handled": False, "jobId": "", "exportId": ""}

    (listed,) = http.get("/v1/privacy/exports", headers=me.auth).json()["items"]
    assert listed["id"] == mine.json()["id"] and listed["status"] == "completed"
    assert listed["downloadUrl"] and listed["expiresAt"]
    assert [e["id"] for e in http.get("/v1/privacy/exports", headers=other.auth).json()["items"]] == [theirs["id"]]

    download = httpx.get(listed["downloadUrl"])
    assert download.status_code == 200 and download.headers["content-type"] == "application/json"
    bundle = download.json()
    manifest, data = bundle["manifest"], bundle["data"]
    assert set(data) == TABLES and set(manifest["counts"]) == TABLES
    assert manifest["subject"] == {"orgId": me.org_id, "userId": me.user_id} and manifest["schemaVersion"] == 1
    assert manifest["sha256"] == listed["sha256"] == hashlib.sha256(
        json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert [u["id"] for u in data["users"]] == [me.user_id]
    assert [p["id"] for p in data["personas"]] == [persona.json()["id"]]
    (key,) = data["api_keys"]
    assert session["sessionId"] in [s["id"] for s in data["chat_sessions"]]
    assert sorted(s["user_id"] for s in data["chat_sessions"]) == sorted([me.user_id, f"openai:{key['id']}"])
    assert len(data["chat_messages"]) == 4
    assert all(e["actor_user_id"] == me.user_id for e in data["audit_events"]) and data["audit_events"]
    text = json.dumps(bundle)
    assert other.org_id not in text and other.user_id not in text
    assert "secret_hash" not in text and me.api_key not in text

    r = http.post(BUILD, json={}, headers=me.auth)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_a_crashed_builders_export_is_claimable_again(engine, http, tenants):
    admin, me = tenants(plan="pro", platform_admin=True), tenants(plan="pro")
    build_all(http, admin)
    export_id = http.post("/v1/privacy/exports", json={}, headers=me.auth).json()["id"]
    with engine.begin() as conn:  # a builder claimed it and died: its lease is already over
        claimed = PrivacyRepository(conn).claim(lease_seconds=-1)
    assert claimed is not None and claimed.id == export_id
    build_all(http, admin)
    assert http.get("/v1/privacy/exports", headers=me.auth).json()["items"][0]["status"] == "completed"


@pytest.fixture(scope="module")
def unconfigured(stack, tmp_path_factory):
    """Processes with exports off, on the session's PostgreSQL and Redis: an edge to them."""
    with running(make_stack_beside(stack, tmp_path_factory.mktemp("dsar-off"), PERSONA_DSAR_EXPORTS="false")) as off, \
            client_for(off) as http:
        yield http


def test_503_when_exports_are_not_configured(unconfigured, tenants):
    http = unconfigured
    admin = tenants(plan="pro", platform_admin=True)
    r = http.post(BUILD, json={}, headers=admin.auth)
    assert r.status_code == 503 and r.json()["error"]["code"] == "service_unavailable"
    assert r.json()["error"]["details"] == {"feature": "privacy_exports"}
