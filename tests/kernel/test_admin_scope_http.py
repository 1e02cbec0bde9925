"""A key's scopes confine every power, a platform administrator's included
(mirrors kernel/principal.py ADMIN_SCOPE and the startup check in
kernel/transport/policy.py): every admin-only RPC requires the
`platform:admin` scope besides platform-admin membership. A platform
administrator's session JWT (the person's own credential) holds it; a key
holds it only when granted, and only a platform administrator may grant it."""

from __future__ import annotations

import pytest
from support import SCOPES, assert_envelope

ADMIN_SCOPE = "platform:admin"
ADMIN_CALLS = [
    ("GET", "/v1/admin/moderation/queue"),
    ("POST", "/v1/admin/dsar/build-one"),
    ("POST", "/v1/admin/webhooks/rotate-secrets"),
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def call(http, method, path, headers):
    return http.request(method, path, headers=headers, **({"json": {}} if method == "POST" else {}))


@pytest.fixture(scope="module")
def admin(tenants):
    return tenants(plan="pro", platform_admin=True)


@pytest.mark.parametrize(("method", "path"), ADMIN_CALLS)
@pytest.mark.parametrize("scopes", [["personas:read"], list(SCOPES)], ids=["personas-read", "six-scopes"])
def test_an_administrators_key_without_the_admin_scope_is_403(http, tenants, admin, method, path, scopes):
    key = bearer(tenants.tenant_key(admin, scopes))
    error = assert_envelope(call(http, method, path, key), 403, "forbidden")
    assert error["details"] == {"requiredScope": ADMIN_SCOPE}


@pytest.mark.parametrize(("method", "path"), ADMIN_CALLS)
def test_an_administrators_key_with_the_admin_scope_and_session_reach_admin_rpcs(http, tenants, admin, jwt_minter,
                                                                                   method, path):
    key = bearer(tenants.tenant_key(admin, [ADMIN_SCOPE]))
    session = bearer(jwt_minter.mint_session(admin.user_id, admin.org_id, admin.workspace_id))
    for headers in (key, session):
        r = call(http, method, path, headers)
        assert r.status_code == 200, r.text


def test_the_admin_scope_without_platform_admin_membership_is_403(http, tenants, jwt_minter):
    tenant = tenants(plan="pro")
    key = bearer(tenants.tenant_key(tenant, [*SCOPES, ADMIN_SCOPE]))  # written directly: the API refuses it
    session = bearer(jwt_minter.mint_session(tenant.user_id, tenant.org_id, tenant.workspace_id))
    for headers in (key, session):
        assert_envelope(call(http, "GET", "/v1/admin/moderation/queue", headers), 403, "forbidden")


def test_only_a_platform_administrator_grants_the_admin_scope(http, tenants, admin):
    tenant = tenants(plan="pro")
    refused = http.post("/v1/keys", json={"name": "ops", "scopes": [ADMIN_SCOPE]}, headers=tenant.auth)
    assert assert_envelope(refused, 403, "forbidden")["details"] == {"scopes": [ADMIN_SCOPE]}
    made = http.post("/v1/keys", json={"name": "ops", "scopes": ["personas:read", ADMIN_SCOPE]}, headers=admin.auth)
    assert made.status_code == 200, made.text
    assert made.json()["key"]["scopes"] == ["personas:read", ADMIN_SCOPE]
    assert http.get("/v1/admin/moderation/queue", headers=bearer(made.json()["secret"])).status_code == 200
    # A key that lacks it cannot grant it, even a platform administrator's.
    six = bearer(tenants.tenant_key(admin, list(SCOPES)))
    r = http.post("/v1/keys", json={"name": "ops", "scopes": [ADMIN_SCOPE]}, headers=six)
    assert assert_envelope(r, 403, "forbidden")["details"] == {"scopes": [ADMIN_SCOPE]}
