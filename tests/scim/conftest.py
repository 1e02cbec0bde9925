from __future__ import annotations

import pytest
from support import Tenant


@pytest.fixture(scope="module")
def org(tenants) -> Tenant:
    """An organization of its own (enterprise: the compliance run makes hundreds of calls)."""
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def scim_token(http, org) -> str:
    r = http.post("/v1/auth/scim/tokens", json={"name": "Okta"}, headers=org.auth)
    assert r.status_code == 200, r.text
    return r.json()["secret"]


@pytest.fixture(scope="module")
def scim(http, scim_token):
    from scim_client import Scim

    return Scim(http, scim_token)
