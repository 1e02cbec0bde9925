"""The platform's secret rotation at once with itself and with an endpoint's writes answers as one serial order
would (tests/oracle.py), through Envoy: an endpoint whose secret is past its age, rotated (AdminService's sweep
over every endpoint), PATCHed and deleted, each pair fired together behind a barrier and compared with both
serial orders (whether the secret was rotated once, keeping the first as the previous one, and the endpoint)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, fixture_body, params, uncovered
from sqlalchemy import text


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]
    endpoint: str
    secret: str  # as created


@pytest.fixture(scope="module")
def admin(tenants):
    return tenants(platform_admin=True)


def _fixture(http, engine, tenants) -> Fixture:
    tenant = tenants()
    # State: one event type (the generator's `*` would subscribe it to every event of the tenant, the rotation's
    # own included: deliveries to a port that discards, which the state does not read and the worker retries).
    r = http.post("/v1/webhooks", headers=tenant.auth,
                  json=fixture_body("CreateWebhookEndpoint", state={"events": ["persona.created"]}))
    assert r.status_code == 200, r.text
    endpoint = r.json()["endpoint"]["id"]
    with engine.begin() as conn:  # past the rotation age (as tests/webhooks/test_webhook_secret.py ages one)
        conn.execute(text("UPDATE webhook_endpoints SET secret_created_at = now() - interval '100 days' "
                          "WHERE id = :id"), {"id": endpoint})
    return Fixture(tenant.auth, endpoint, r.json()["secret"])


def _ops(http, admin) -> list[Op]:
    auth = admin.auth if admin is not None else {}  # (None: only the names, for the parameters)
    return [
        Op("rotate", lambda f: http.post("/v1/admin/webhooks/rotate-secrets", headers=auth,
                                         json=body("RotateWebhookSecrets")), "RotateWebhookSecrets"),
        # Distinguishing: the state reads the description and `enabled`, which the generated PATCH (its URL) leaves.
        Op("patch", lambda f: http.patch(f"/v1/webhooks/{f.endpoint}", headers=f.auth, json=body(
            "UpdateWebhookEndpoint", distinguishing={"description": "renamed", "enabled": False})),
           "UpdateWebhookEndpoint"),
        Op("delete", lambda f: http.delete(f"/v1/webhooks/{f.endpoint}", headers=f.auth), "DeleteWebhookEndpoint"),
    ]


def _state(http, f: Fixture):
    got = http.get(f"/v1/webhooks/{f.endpoint}", headers=f.auth)
    if got.status_code == 404:
        return "gone"
    secret = http.get(f"/v1/webhooks/{f.endpoint}/secret", headers=f.auth).json()
    return (got.json()["description"], got.json()["enabled"], secret["secret"] != f.secret,
            secret.get("previousSecret") == f.secret)


def _table(http, engine, tenants, admin) -> Table:
    return Table("a webhook endpoint with a secret past its age", make=lambda: _fixture(http, engine, tenants),
                 read=lambda f: _state(http, f), ops=_ops(http, admin))


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, engine, tenants, admin, a, b):
    assert check_named(_table(http, engine, tenants, admin), a, b) == []


def test_the_oracle_tries_the_rotation():
    """All but BuildOneDsarExport: a sweep that claims the oldest pending export of any organization (SKIP LOCKED),
    as the runner's builder does in the background, so no fixture says which export a call builds;
    tests/privacy/test_exports_http.py holds its claim, and a crashed builder's export claimed again."""
    assert uncovered("AdminService", [_table(None, None, None, None)]) == {"BuildOneDsarExport"}
