"""Idempotency-Key on writes, over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/idempotency.py and the pipeline's idempotency
stage). Spec: Errors › Idempotency."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from cryptography.fernet import Fernet
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.transport.idempotency import Idempotency
from sqlalchemy import text
from support import assert_envelope

KEYS = "/v1/keys"


def idem(tenant_or_key, key: str) -> dict[str, str]:
    secret = tenant_or_key if isinstance(tenant_or_key, str) else tenant_or_key.api_key
    return {"Authorization": f"Bearer {secret}", "Idempotency-Key": key}


def key_ids(http: httpx.Client, tenant) -> set[str]:
    r = http.get(KEYS, params={"limit": 100}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    body = r.json()
    assert not body.get("nextCursor")
    return {k["id"] for k in body.get("items", [])}


def new_key() -> str:
    return f"idem-{uuid.uuid4()}"


def test_replay_returns_the_stored_response(http, tenants):
    t = tenants()
    before = key_ids(http, t)
    key = new_key()
    body = {"name": "replayed", "scopes": ["config:read"]}

    first = http.post(KEYS, json=body, headers=idem(t, key))
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    second = http.post(KEYS, json=body, headers=idem(t, key))

    assert second.status_code == first.status_code
    assert second.json() == first.json()
    assert second.json()["secret"] == first.json()["secret"]
    assert second.json()["key"]["id"] == first.json()["key"]["id"]
    assert second.headers["idempotent-replayed"] == "true"
    # Per-response headers are fresh on the replay.
    assert second.headers["x-request-id"] != first.headers["x-request-id"]
    assert "x-ratelimit-remaining" in second.headers
    assert key_ids(http, t) - before == {first.json()["key"]["id"]}


def test_same_key_different_body_is_a_conflict(http, tenants):
    t = tenants()
    key = new_key()
    ok = http.post(KEYS, json={"name": "one", "scopes": ["config:read"]}, headers=idem(t, key))
    assert ok.status_code == 200, ok.text
    before = key_ids(http, t)

    r = http.post(KEYS, json={"name": "two", "scopes": ["config:read"]}, headers=idem(t, key))
    error = assert_envelope(r, 409, "idempotency_conflict")
    assert error["details"]["reason"] == "payload_mismatch"
    assert r.headers["x-should-retry"] == "false"
    assert "idempotent-replayed" not in r.headers
    assert key_ids(http, t) == before


def test_json_key_order_and_whitespace_are_not_a_mismatch(http, tenants):
    t = tenants()
    key = new_key()
    compact = '{"name":"canonical","scopes":["config:read","personas:read"]}'
    spaced = '{\n  "scopes" : [ "config:read" ,  "personas:read" ],\n\t"name":   "canonical"\n}'
    headers = {**idem(t, key), "Content-Type": "application/json"}

    first = http.post(KEYS, content=compact, headers=headers)
    assert first.status_code == 200, first.text
    second = http.post(KEYS, content=spaced, headers=headers)
    assert second.status_code == 200, second.text
    assert second.headers.get("idempotent-replayed") == "true"
    assert second.json() == first.json()


def test_the_key_is_the_organizations(http, tenants):
    """Keys are scoped per organization (as Stripe's per account): the same key and request from another
    credential of the organization is the one execution; another request under it is a mismatch."""
    t = tenants()
    other_secret = tenants.tenant_key(t, ["config:read", "config:write"])
    key = new_key()
    body = {"name": "shared", "scopes": ["config:read"]}

    a = http.post(KEYS, json=body, headers=idem(t, key))
    assert a.status_code == 200, a.text
    b = http.post(KEYS, json=body, headers=idem(other_secret, key))
    assert b.status_code == 200, b.text
    assert b.headers["idempotent-replayed"] == "true" and b.json() == a.json()

    mismatch = http.post(KEYS, json={"name": "other body", "scopes": ["config:read"]}, headers=idem(other_secret, key))
    assert assert_envelope(mismatch, 409, "idempotency_conflict")["details"]["reason"] == "payload_mismatch"
    # The caller's workspace is part of the request: the same body from another workspace is another request.
    elsewhere = tenants.workspace(t)
    moved = http.post(KEYS, json=body, headers=idem(elsewhere, key))
    assert assert_envelope(moved, 409, "idempotency_conflict")["details"]["reason"] == "payload_mismatch"
    # Another organization's key of the same name is its own.
    stranger = http.post(KEYS, json=body, headers=idem(tenants(), key))
    assert stranger.status_code == 200 and "idempotent-replayed" not in stranger.headers


def test_validation_failure_is_not_stored(http, tenants):
    t = tenants()
    key = new_key()
    before = key_ids(http, t)
    bad = http.post(KEYS, json={"name": "bad", "scopes": ["read:personas"]}, headers=idem(t, key))
    assert_envelope(bad, 422, "validation_failed")

    good = http.post(KEYS, json={"name": "good", "scopes": ["personas:read"]}, headers=idem(t, key))
    assert good.status_code == 200, good.text
    assert "idempotent-replayed" not in good.headers
    assert key_ids(http, t) - before == {good.json()["key"]["id"]}


def test_parallel_requests_with_one_key_create_exactly_one(stack, tenants):
    t = tenants()
    key = new_key()
    body = {"name": "parallel", "scopes": ["config:read"]}
    with httpx.Client(base_url=stack.http_url, timeout=30, limits=httpx.Limits(max_connections=64)) as client:
        before = key_ids(client, t)
        with ThreadPoolExecutor(max_workers=50) as pool:
            responses = list(pool.map(lambda _: client.post(KEYS, json=body, headers=idem(t, key)), range(50)))
        after = key_ids(client, t)

    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 409}, statuses
    successes = [r for r in responses if r.status_code == 200]
    assert successes
    originals = [r for r in successes if "idempotent-replayed" not in r.headers]
    assert len(originals) == 1, [r.headers.get("idempotent-replayed") for r in successes]
    assert all(r.json() == successes[0].json() for r in successes)
    for r in responses:
        if r.status_code == 409:
            error = assert_envelope(r, 409, "idempotency_conflict")
            assert error["details"]["reason"] == "in_flight", error
            assert r.headers["retry-after"] == "1"
    assert after - before == {successes[0].json()["key"]["id"]}


def test_a_refusal_that_committed_nothing_is_not_stored(http, tenants):
    """A refusal raised inside the operation depends on state a retry may find changed: the key is
    released, and the retry runs again (no `Idempotent-Replayed`)."""
    t = tenants(plan="pro")
    key = new_key()
    before = key_ids(http, t)
    body = {"name": "allowlisted", "scopes": ["config:read"], "ipAllowlist": ["203.0.113.0/24"]}

    first = http.post(KEYS, json=body, headers=idem(t, key))
    error = assert_envelope(first, 403, "forbidden")
    assert error["details"]["requiredPlan"] == "enterprise"
    second = http.post(KEYS, json=body, headers=idem(t, key))
    assert_envelope(second, 403, "forbidden")
    assert "idempotent-replayed" not in second.headers
    assert key_ids(http, t) == before


def test_a_conflict_a_retry_may_not_meet_is_not_stored(http, tenant):
    """A 409 `state_conflict` (a slug another persona holds) is not replayed: once the slug is free, the
    retry with the same key creates the persona."""
    slug = f"held-{uuid.uuid4().hex[:8]}"
    holder = http.post("/v1/personas", json={"intent": "A harbour pilot", "slug": slug}, headers=tenant.auth)
    assert holder.status_code == 200, holder.text
    key = new_key()
    body = {"intent": "A lighthouse keeper", "slug": slug}
    conflict = http.post("/v1/personas", json=body, headers=idem(tenant, key))
    assert_envelope(conflict, 409, "state_conflict")
    renamed = http.patch(f"/v1/personas/{holder.json()['id']}", json={"slug": slug + "-old"}, headers=tenant.auth)
    assert renamed.status_code == 200, renamed.text
    created = http.post("/v1/personas", json=body, headers=idem(tenant, key))
    assert created.status_code == 200, created.text
    assert created.json()["slug"] == slug and "idempotent-replayed" not in created.headers


def test_expired_records_are_purged(http, tenants, engine):
    t = tenants()
    key = new_key()
    body = {"name": "aged", "scopes": ["config:read"]}
    first = http.post(KEYS, json=body, headers=idem(t, key))
    assert first.status_code == 200, first.text
    fresh_key = new_key()
    assert http.post(KEYS, json=body, headers=idem(t, fresh_key)).status_code == 200

    past = datetime.now(UTC) - timedelta(hours=1)
    with engine.begin() as conn:
        aged = conn.execute(
            text("UPDATE idempotency_keys SET expires_at = :past WHERE org_id = :org AND key = :key"),
            {"past": past, "org": t.org_id, "key": key},
        ).rowcount
    assert aged == 1

    assert Idempotency(engine, SecretBox(Fernet.generate_key().decode())).purge_expired() >= 1

    with engine.connect() as conn:
        left = dict(
            conn.execute(
                text("SELECT key, count(*) FROM idempotency_keys WHERE org_id = :org GROUP BY key"), {"org": t.org_id}
            ).all()
        )
    assert key not in left
    assert left.get(fresh_key) == 1

    # The purged key is free again: the same request now creates a new key.
    again = http.post(KEYS, json=body, headers=idem(t, key))
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers
    assert again.json()["key"]["id"] != first.json()["key"]["id"]


@pytest.mark.parametrize("bad_key", ["x" * 256, "has space", "caf\u00e9"])
def test_malformed_idempotency_key_is_refused(http, tenant, bad_key):
    headers = {**tenant.auth, "Idempotency-Key": bad_key.encode()}
    r = http.post(KEYS, json={"name": "k", "scopes": ["config:read"]}, headers=headers)
    error = assert_envelope(r, 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "Idempotency-Key"
