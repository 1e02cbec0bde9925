"""A SCIM token's writes at once answer as one serial order would (tests/oracle.py), through Envoy: the owner
revoking the token, the token used for a write (it provisions a user), and a second token made beside it, each
pair fired together behind a barrier and compared with both serial orders (the organization's tokens and which
are revoked, and whether the user was provisioned)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair, writes_covered
from persona.v1 import scim_pb2
from scim_client import USER, Scim


@dataclass(frozen=True)
class Fixture:
    owner: dict[str, str]
    token: str
    secret: str
    user_name: str


def _fixture(http, tenants) -> Fixture:
    org = tenants(plan="enterprise")
    r = http.post("/v1/auth/scim/tokens", json={"name": "Okta"}, headers=org.auth)
    assert r.status_code == 200, r.text
    return Fixture(org.auth, r.json()["token"]["id"], r.json()["secret"], f"u-{uuid.uuid4().hex[:10]}@example.com")


def _ops(http) -> list[Op]:
    return [
        Op("revoke", lambda f: http.post(f"/v1/auth/scim/tokens/{f.token}/revoke", json={}, headers=f.owner),
           "RevokeScimToken"),
        Op("use", lambda f: Scim(http, f.secret).call("POST", "/Users", {"schemas": [USER], "userName": f.user_name})),
        Op("create", lambda f: http.post("/v1/auth/scim/tokens", json={"name": "Entra"}, headers=f.owner),
           "CreateScimToken"),
    ]


def _state(http, f: Fixture):
    tokens = http.get("/v1/auth/scim/tokens", params={"limit": 100}, headers=f.owner).json()["items"]
    users = http.get("/v1/auth/scim/v2/Users", params={"filter": f'userName eq "{f.user_name}"'},
                     headers=f.owner).json()["totalResults"]
    return sorted((t["name"], t["revokedAt"] is not None) for t in tokens), users


def _table(http, tenants) -> Table:
    return Table("a SCIM token in use", make=lambda: _fixture(http, tenants), read=lambda f: _state(http, f),
                 ops=_ops(http))


PAIRS = [(a.name, b.name) for a, b in _table(None, None).pairs]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_writes_at_once_answer_as_one_serial_order(http, tenants, a, b):
    table = _table(http, tenants)
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []


def test_the_oracle_tries_every_write_of_a_token():
    service = scim_pb2.DESCRIPTOR.services_by_name["ScimTokenService"]
    assert writes_covered(service, [_table(None, None)], set()) == set()
