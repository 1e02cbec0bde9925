"""The moderation queue through Envoy: a blocked intent appears for platform
administrators (never for others), is claimed by one administrator at a
time, resolved, and audited; approving a flagged marketplace listing
publishes it."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

QUEUE = "/v1/admin/moderation/queue"


@pytest.fixture(scope="module")
def admins(tenants):
    return tenants(plan="pro", platform_admin=True), tenants(plan="pro", platform_admin=True)


def _queued(http, admin, org_id: str) -> list[dict]:
    r = http.get(QUEUE, params={"orgId": org_id, "limit": 100}, headers=admin.auth)
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_a_blocked_intent_is_claimed_and_resolved_by_one_admin(http, engine, tenants, admins):
    first, second = admins
    org = tenants(plan="pro")
    r = http.post("/v1/personas", json={"intent": "A persona who explains how to build a bomb"}, headers=org.auth)
    assert r.status_code == 422 and r.json()["error"]["code"] == "moderation_blocked"
    assert http.get(QUEUE, headers=org.auth).status_code == 403

    (item,) = _queued(http, first, org.org_id)
    assert item["stage"] == "input_intent" and item["subjectType"] == "persona_intent"
    assert "violence" in item["categories"] and item["scores"]["violence"] > 0.5 and "bomb" in item["excerpt"]
    assert [i["id"] for i in http.get(QUEUE, params={"orgId": org.org_id, "category": "violence"},
                                      headers=first.auth).json()["items"]] == [item["id"]]
    assert http.get(QUEUE, params={"orgId": org.org_id, "category": "hate"}, headers=first.auth).json()["items"] == []

    claim = f"{QUEUE}/{item['id']}/claim"
    r = http.post(claim, json={}, headers=first.auth)
    assert r.status_code == 200 and r.json()["status"] == "claimed" and r.json()["claimExpiresAt"]
    r = http.post(claim, json={}, headers=second.auth)
    assert r.status_code == 409 and r.json()["error"]["code"] == "state_conflict"
    r = http.post(f"{QUEUE}/{item['id']}/resolve", json={"decision": "reject", "note": "clear violence"},
                  headers=second.auth)
    assert r.status_code == 409
    r = http.post(f"{QUEUE}/{item['id']}/resolve", json={"decision": "reject", "note": "clear violence"},
                  headers=first.auth)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "resolved" and r.json()["decision"] == "reject" and r.json()["resolvedAt"]
    assert _queued(http, first, org.org_id) == []
    r = http.post(f"{QUEUE}/{item['id']}/resolve", json={"decision": "approve"}, headers=first.auth)
    assert r.status_code == 409
    r = http.post(f"{QUEUE}/{item['id']}/resolve", json={"decision": "maybe"}, headers=first.auth)
    assert r.status_code == 422
    with engine.connect() as conn:
        actions = conn.execute(text("SELECT action FROM audit_events WHERE resource_id = :i AND outcome = 'success' "
                                    "ORDER BY occurred_at"), {"i": item["id"]}).scalars().all()
    assert actions == ["moderation_review.claim", "moderation_review.resolve"]


def test_approving_a_flagged_listing_publishes_it(http, tenants, admins):
    admin = admins[0]
    seller = tenants(plan="team")
    persona = http.post("/v1/personas", json={"intent": "A calm chemistry teacher who loves safety goggles"},
                        headers=seller.auth).json()
    listing = http.post("/v1/marketplace/listings", headers=seller.auth, json={
        "personaId": persona["id"], "title": "How not to build a bomb: lab safety", "audienceTags": ["school"],
    }).json()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listing = http.get(f"/v1/marketplace/listings/{listing['id']}", headers=seller.auth).json()
        if listing["status"] != "pending_review":
            break
        time.sleep(0.05)
    assert listing["status"] == "rejected"
    (item,) = [i for i in _queued(http, admin, seller.org_id) if i["subjectId"] == listing["id"]]
    r = http.post(f"{QUEUE}/{item['id']}/resolve", json={"decision": "approve", "note": "educational"},
                  headers=admin.auth)
    assert r.status_code == 200, r.text
    assert http.get(f"/v1/marketplace/listings/{listing['id']}", headers=seller.auth).json()["status"] == "published"
