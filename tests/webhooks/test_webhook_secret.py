"""Receivers can read an endpoint's secrets (current and, during a rotation
grace, previous), and every read is audited."""

from __future__ import annotations

from persona_service.kernel.principal import SCOPES
from support import assert_envelope


def _endpoint(http, tenant):
    r = http.post(
        "/v1/webhooks", headers=tenant.auth,
        json={"url": "http://127.0.0.1:9/hook", "events": ["persona.created"]},
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_secret_is_readable_with_write_scope_and_audited(http, tenants):
    tenant = tenants()
    created = _endpoint(http, tenant)
    endpoint_id = created["endpoint"]["id"]
    r = http.get(f"/v1/webhooks/{endpoint_id}/secret", headers=tenant.auth)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["secret"] == created["secret"]
    assert body["previousSecret"] == ""
    assert body["previousSecretExpiresAt"] is None
    events = http.get(
        "/v1/audit/events", headers=tenant.auth, params={"action": "webhook_endpoint.read_secret"}
    ).json()["items"]
    assert [e["resourceId"] for e in events] == [endpoint_id]
    assert events[0]["requestId"] == r.headers["x-request-id"]


def test_secret_needs_write_scope_and_is_tenant_scoped(http, tenants):
    tenant, other = tenants(), tenants()
    endpoint_id = _endpoint(http, tenant)["endpoint"]["id"]
    reader = tenants.tenant_key(tenant, [s for s in SCOPES if s != "config:write"])
    r = http.get(f"/v1/webhooks/{endpoint_id}/secret", headers={"Authorization": f"Bearer {reader}"})
    assert assert_envelope(r, 403, "forbidden")["details"]["requiredScope"] == "config:write"
    assert_envelope(http.get(f"/v1/webhooks/{endpoint_id}/secret", headers=other.auth), 404, "not_found")


def test_rotated_secret_and_previous_during_grace(http, tenants, engine):
    from sqlalchemy import text

    tenant, admin = tenants(), tenants(platform_admin=True)
    created = _endpoint(http, tenant)
    endpoint_id = created["endpoint"]["id"]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE webhook_endpoints SET secret_created_at = now() - interval '100 days' WHERE id = :id"),
            {"id": endpoint_id},
        )
    r = http.post("/v1/admin/webhooks/rotate-secrets", headers=admin.auth, json={})
    assert r.status_code == 200, r.text
    body = http.get(f"/v1/webhooks/{endpoint_id}/secret", headers=tenant.auth).json()
    assert body["secret"].startswith("whsec_") and body["secret"] != created["secret"]
    assert body["previousSecret"] == created["secret"]
    assert body["previousSecretExpiresAt"] > body["secretCreatedAt"]
