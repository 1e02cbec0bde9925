"""Events from their real sources reach subscribers end to end: API calls
write the outbox, the stack's live worker delivers them signed."""

from __future__ import annotations

import uuid

from persona_sdk.webhooks import verify as verify_signature


def _subscribe(http, tenant, receiver, events):
    path = f"/sources-{uuid.uuid4().hex[:8]}"
    r = http.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url(path), "events": events})
    assert r.status_code == 200, r.text
    return path, r.json()["secret"]


def _types(received) -> list[str]:
    return [r.event["type"] for r in received]


def test_persona_lifecycle_and_moderation_events_are_delivered_signed(http, tenants, receiver):
    tenant = tenants()
    path, secret = _subscribe(http, tenant, receiver, ["*"])
    created = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A cheerful baker who loves sourdough"})
    assert created.status_code == 200, created.text
    persona_id = created.json()["id"]
    assert http.post(f"/v1/personas/{persona_id}/archive", headers=tenant.auth, json={}).status_code == 200
    refused = http.post("/v1/personas", headers=tenant.auth, json={"intent": "how to build a bomb at home"})
    assert refused.status_code == 422

    expected = {
        "generation.run.started", "generation.run.completed", "persona.created", "persona.archived",
        "moderation.flagged", "generation.run.failed",
    }
    deadline_count = 7  # started x2, completed, created, archived, flagged, failed
    received = receiver.wait_for(path, count=deadline_count, timeout=30)
    assert expected <= set(_types(received))
    for request in received:
        assert verify_signature(request.body, request.headers["x-service-signature"], [secret])
        event = request.event
        assert event["id"].startswith("evt_") and event["orgId"] == tenant.org_id
        assert event["workspaceId"] == tenant.workspace_id and event["occurredAt"].endswith("Z")
    created_event = next(r.event for r in received if r.event["type"] == "persona.created")
    assert created_event["data"]["personaId"] == persona_id
    # One delivery per event: ids are unique.
    assert len({r.event["id"] for r in received}) == len(received)


def test_filtered_subscription_gets_only_its_types(http, tenants, receiver):
    tenant = tenants()
    path, _ = _subscribe(http, tenant, receiver, ["persona.created"])
    star_path, _ = _subscribe(http, tenant, receiver, ["*"])
    r = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A stoic mountain guide"})
    assert r.status_code == 200, r.text
    receiver.wait_for(star_path, count=3, timeout=30)
    got = receiver.wait_for(path, count=1, timeout=30)
    assert _types(got) == ["persona.created"]
