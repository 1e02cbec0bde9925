"""Webhook endpoints over HTTP/JSON through Envoy, on the shared stack (whose
worker process delivers for real): CRUD, validation, the spec's
cursor/limit list, scopes, ping, subscriptions, signatures, replay, admin-only
rotation."""

from __future__ import annotations

import base64
import re
import uuid

import pytest
import standardwebhooks
from persona_sdk.webhooks import verify as verify_signature
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.outbox import EVENT_TYPES, Outbox
from sqlalchemy import text
from support import assert_envelope

ENDPOINT_FIELDS = {"id", "url", "events", "description", "enabled", "workspaceId", "createdAt", "updatedAt",
                   "secretCreatedAt", "previousSecretExpiresAt", "standardWebhooks"}


def create(http, auth, url, events=("*",), **extra) -> dict:
    r = http.post("/v1/webhooks", headers=auth, json={"url": url, "events": list(events), **extra})
    assert r.status_code == 200, r.text
    return r.json()


def path() -> str:
    return f"/hook-{uuid.uuid4().hex[:10]}"


def test_crud_and_secret_shown_once(http, tenant, receiver):
    made = create(http, tenant.auth, receiver.url(path()), ["persona.created"], description="crm")
    endpoint, secret = made["endpoint"], made["secret"]
    assert secret.startswith("whsec_") and len(secret) > 30
    assert set(endpoint) == ENDPOINT_FIELDS
    assert endpoint["id"].startswith("whe_") and endpoint["enabled"] is True
    assert endpoint["events"] == ["persona.created"] and endpoint["workspaceId"] == tenant.workspace_id

    got = http.get(f"/v1/webhooks/{endpoint['id']}", headers=tenant.auth)
    assert got.status_code == 200 and got.json() == endpoint
    assert secret not in got.text

    r = http.patch(f"/v1/webhooks/{endpoint['id']}", headers=tenant.auth,
                   json={"events": ["persona.deleted", "persona.archived"], "enabled": False})
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["events"] == ["persona.archived", "persona.deleted"] and updated["enabled"] is False
    assert updated["description"] == "crm" and updated["url"] == endpoint["url"]

    r = http.delete(f"/v1/webhooks/{endpoint['id']}", headers=tenant.auth)
    assert r.status_code == 200 and r.json() == {"id": endpoint["id"], "deleted": True}
    assert_envelope(http.get(f"/v1/webhooks/{endpoint['id']}", headers=tenant.auth), 404, "not_found")


@pytest.mark.parametrize("events", [["audit.test_failed"], ["persona.created", "nope"], ["*", "persona.created"]])
def test_unknown_event_types_are_422(http, tenant, receiver, events):
    r = http.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url("/x"), "events": events})
    error = assert_envelope(r, 422, "validation_failed")
    assert any(v["path"].startswith("events") for v in error["details"]["validationErrors"])


def test_required_fields(http, tenant):
    error = assert_envelope(http.post("/v1/webhooks", headers=tenant.auth, json={}), 422, "validation_failed")
    assert {v["path"] for v in error["details"]["validationErrors"]} == {"url", "events"}


def test_list_pages_with_cursor_and_limit(http, tenants, receiver):
    t = tenants()
    ids = [create(http, t.auth, receiver.url("/p"))["endpoint"]["id"] for _ in range(5)]
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = http.get("/v1/webhooks", headers=t.auth, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"items", "nextCursor"}
        assert len(body["items"]) <= 2
        seen += [i["id"] for i in body["items"]]
        pages += 1
        cursor = body["nextCursor"]
        if not cursor:
            break
    assert seen == list(reversed(ids)) and pages == 3
    # Default page size 20, and an empty nextCursor on the last page.
    body = http.get("/v1/webhooks", headers=t.auth).json()
    assert len(body["items"]) == 5 and body["nextCursor"] == ""


@pytest.mark.parametrize("limit", [0, 101, -1])
def test_list_limit_bounds(http, tenant, limit):
    error = assert_envelope(http.get("/v1/webhooks", headers=tenant.auth, params={"limit": limit}), 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "limit"


def test_list_limit_edges_accepted(http, tenant):
    for limit in (1, 100):
        assert http.get("/v1/webhooks", headers=tenant.auth, params={"limit": limit}).status_code == 200


def test_tampered_cursor_is_400(http, tenants, receiver):
    t = tenants()
    for _ in range(2):
        create(http, t.auth, receiver.url("/p"))
    cursor = http.get("/v1/webhooks", headers=t.auth, params={"limit": 1}).json()["nextCursor"]
    body, mac = cursor.split(".")
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).replace(b"webhooks:", b"webhookz:")
    forged = base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + mac
    for bad in (forged, cursor[:-3], "garbage"):
        assert_envelope(http.get("/v1/webhooks", headers=t.auth, params={"cursor": bad}), 400, "bad_request")
    # Another tenant's cursor is not valid here either.
    assert_envelope(http.get("/v1/webhooks", headers=tenants().auth, params={"cursor": cursor}), 400, "bad_request")


def test_unauthenticated_and_scopes(http, tenants):
    t = tenants()
    assert_envelope(http.get("/v1/webhooks"), 401, "unauthorized")
    reader = {"Authorization": "Bearer " + tenants.tenant_key(t, ["config:read"])}
    assert http.get("/v1/webhooks", headers=reader).status_code == 200
    r = http.post("/v1/webhooks", headers=reader, json={"url": "https://example.com/h", "events": ["*"]})
    assert_envelope(r, 403, "forbidden")
    other = {"Authorization": "Bearer " + tenants.tenant_key(t, ["personas:read"])}
    assert_envelope(http.get("/v1/webhooks", headers=other), 403, "forbidden")


def test_endpoints_are_workspace_scoped(http, tenants, receiver):
    a, b = tenants(), tenants()
    endpoint = create(http, a.auth, receiver.url("/p"))["endpoint"]
    assert_envelope(http.get(f"/v1/webhooks/{endpoint['id']}", headers=b.auth), 404, "not_found")
    assert_envelope(http.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=b.auth, json={}), 404, "not_found")


def test_ping_is_signed_and_delivered_to_that_endpoint_only(http, tenants, receiver):
    t = tenants()
    p1, p2 = path(), path()
    made = create(http, t.auth, receiver.url(p1), ["persona.created"])  # not subscribed to test_ping: still pinged
    create(http, t.auth, receiver.url(p2), ["*"])
    r = http.post(f"/v1/webhooks/{made['endpoint']['id']}/ping", headers=t.auth, json={})
    assert r.status_code == 200, r.text
    event_id = r.json()["eventId"]
    got = receiver.wait_for(p1)[0]
    envelope = got.event
    assert envelope == {
        "id": event_id, "type": "webhook.endpoint.test_ping", "occurredAt": envelope["occurredAt"],
        "orgId": t.org_id, "workspaceId": t.workspace_id, "data": {"endpointId": made["endpoint"]["id"]},
    }
    # The same JSON as GET /v1/events/{id}: one precision (milliseconds), one form per field.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z", envelope["occurredAt"])
    assert http.get(f"/v1/events/{event_id}", headers=t.auth).json() == envelope
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-service-event-id"] == event_id
    header = got.headers["x-service-signature"]
    assert header.startswith("t=") and header.count("v1=") == 1
    assert verify_signature(got.body, header, [made["secret"]])
    assert not verify_signature(got.body, header, ["whsec_wrong"])
    assert not verify_signature(got.body + b" ", header, [made["secret"]])
    assert not verify_signature(got.body, header, [made["secret"]], now=got.at + 301)
    # The ping goes to the endpoint it names only.
    assert receiver.at(p2) == []


def test_standard_webhooks_headers_verify_with_the_reference_library(http, tenant, receiver):
    p = path()
    made = create(http, tenant.auth, receiver.url(p), standardWebhooks=True)
    endpoint, secret = made["endpoint"], made["secret"]
    assert endpoint["standardWebhooks"] is True
    base64.b64decode(secret.removeprefix("whsec_"), validate=True)  # the form those libraries decode
    event_id = http.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=tenant.auth, json={}).json()["eventId"]
    got = receiver.wait_for(p)[0]
    assert got.headers["webhook-id"] == event_id
    assert got.headers["webhook-timestamp"] == got.headers["x-service-signature"].split(",")[0].removeprefix("t=")
    assert standardwebhooks.Webhook(secret).verify(got.body, dict(got.headers))["id"] == event_id
    assert verify_signature(got.body, got.headers["x-service-signature"], [secret])  # ours still sent
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(base64.b64encode(b"another key of enough length!!").decode()).verify(
            got.body, dict(got.headers))
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(secret).verify(got.body + b" ", dict(got.headers))

    # Off again: only our own signature.
    r = http.patch(f"/v1/webhooks/{endpoint['id']}", headers=tenant.auth, json={"standardWebhooks": False})
    assert r.status_code == 200 and r.json()["standardWebhooks"] is False, r.text
    http.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=tenant.auth, json={})
    again = receiver.wait_for(p, 2)[-1]
    assert "webhook-signature" not in again.headers and "x-service-signature" in again.headers


def test_star_and_filtered_subscriptions(http, tenants, engine, receiver):
    t = tenants()
    p_all, p_some, p_off = path(), path(), path()
    create(http, t.auth, receiver.url(p_all), ["*"])
    create(http, t.auth, receiver.url(p_some), ["persona.updated", "moderation.flagged"])
    create(http, t.auth, receiver.url(p_off), ["*"], enabled=False)
    types = sorted(EVENT_TYPES - {"webhook.endpoint.test_ping", "persona.audit_failed"})
    with engine.begin() as conn:
        emitted = {Outbox(Work.on(conn)).emit(ty, t.org_id, t.workspace_id, {"n": i}): ty for i, ty in enumerate(types)}
    got_all = receiver.wait_for(p_all, len(types))
    got_some = receiver.wait_for(p_some, 2)
    assert {r.event["id"] for r in got_all} == set(emitted)
    assert sorted(r.event["type"] for r in got_some) == ["moderation.flagged", "persona.updated"]
    assert receiver.at(p_off) == []


def test_deliveries_listing_and_replay_keeps_event_id(http, tenants, receiver):
    t = tenants()
    p = path()
    endpoint = create(http, t.auth, receiver.url(p))["endpoint"]
    event_id = http.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=t.auth, json={}).json()["eventId"]
    receiver.wait_for(p)
    deliveries = _wait_status(http, t, endpoint["id"], "succeeded")
    assert len(deliveries) == 1
    d = deliveries[0]
    assert d["eventId"] == event_id and d["attemptCount"] == 1 and d["id"].startswith("whd_")
    assert d["attempts"][0]["statusCode"] == 200 and d["attempts"][0]["success"] is True
    assert d["attempts"][0]["responseBody"] == "ok"

    r = http.post(f"/v1/webhooks/{endpoint['id']}/deliveries/{d['id']}/replay", headers=t.auth, json={})
    assert r.status_code == 200, r.text
    replay = r.json()
    assert replay["replayOf"] == d["id"] and replay["eventId"] == event_id and replay["status"] == "pending"
    second = receiver.wait_for(p, 2)[1]
    assert second.event["id"] == event_id and second.headers["x-service-delivery-id"] == replay["id"]
    assert len(_wait_status(http, t, endpoint["id"], "succeeded", count=2)) == 2
    listed = http.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=t.auth, params={"status": "dead_lettered"})
    assert listed.status_code == 200 and listed.json()["items"] == []
    assert_envelope(http.post(f"/v1/webhooks/{endpoint['id']}/deliveries/whd_nope/replay", headers=t.auth, json={}),
                    404, "not_found")
    bad = http.get(f"/v1/webhooks/{endpoint['id']}/deliveries", headers=t.auth, params={"status": "lost"})
    assert_envelope(bad, 422, "validation_failed")


def test_a_replay_of_an_aged_out_event_is_a_conflict(http, tenants, receiver, engine):
    """Events age out (their month dropped past PERSONA_EVENT_RETENTION_DAYS): a delivery of one is listed still,
    but a replay, which would be sent with the event's payload, is refused rather than left pending for ever."""
    t = tenants()
    endpoint = create(http, t.auth, receiver.url(path()))["endpoint"]
    event_id = http.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=t.auth, json={}).json()["eventId"]
    [delivery] = _wait_status(http, t, endpoint["id"], "succeeded")
    with engine.begin() as conn:  # what dropping its month does to the event
        conn.execute(text("DELETE FROM events WHERE id = :id"), {"id": event_id})
    r = http.post(f"/v1/webhooks/{endpoint['id']}/deliveries/{delivery['id']}/replay", headers=t.auth, json={})
    error = assert_envelope(r, 409, "state_conflict")
    assert error["details"]["eventId"] == event_id
    assert [d["id"] for d in _wait_status(http, t, endpoint["id"], "succeeded")] == [delivery["id"]]


def _wait_status(http, t, endpoint_id, status, count=1, timeout=15):
    import time

    deadline = time.monotonic() + timeout
    while True:
        r = http.get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=t.auth, params={"status": status})
        assert r.status_code == 200, r.text
        items = r.json()["items"]
        if len(items) >= count or time.monotonic() > deadline:
            return items
        time.sleep(0.1)


def test_rotation_is_platform_admin_only(http, tenants):
    t = tenants()
    error = assert_envelope(http.post("/v1/admin/webhooks/rotate-secrets", headers=t.auth, json={}), 403, "forbidden")
    assert "administrator" in error["message"]
    assert_envelope(http.post("/v1/admin/webhooks/rotate-secrets", json={}), 401, "unauthorized")
    admin = tenants(platform_admin=True)
    r = http.post("/v1/admin/webhooks/rotate-secrets", headers=admin.auth, json={})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["maxAgeSeconds"] == 7776000 and body["secretRotationGraceSeconds"] == 604800
    assert isinstance(body["results"], list)


def test_a_patch_racing_a_delete_answers_as_if_the_delete_won(http, engine, tenant):
    """The DELETE takes the row first; the PATCH, at the same moment, finds it gone: 404, never 500."""
    from races import at_once, row_locked

    endpoint = create(http, tenant.auth, "https://example.com" + path())["endpoint"]
    url = f"/v1/webhooks/{endpoint['id']}"
    deleted, patched = at_once(engine, row_locked(engine, "webhook_endpoints", endpoint["id"]),
                               lambda: http.delete(url, headers=tenant.auth),
                               lambda: http.patch(url, json={"description": "late"}, headers=tenant.auth))
    assert deleted.status_code in (200, 204), deleted.text
    assert_envelope(patched, 404, "not_found")
    assert http.get(url, headers=tenant.auth).status_code == 404
