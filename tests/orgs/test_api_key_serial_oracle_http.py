"""An API key's writes at once answer as one serial order would (tests/oracle.py), through Envoy: the owner
revoking a key, and the key used for a write (it creates another key), each pair fired together behind a barrier
and compared with both serial orders (which keys the workspace holds, and which are revoked)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair, writes_covered
from persona.v1 import keys_pb2

SCOPES = ["personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write"]


@dataclass(frozen=True)
class Fixture:
    owner: dict[str, str]
    key: str
    used: dict[str, str]  # the key's own bearer


def _fixture(http, tenants) -> Fixture:
    org = tenants(plan="pro")
    r = http.post("/v1/keys", json={"name": "k", "scopes": SCOPES}, headers=org.auth)
    assert r.status_code == 200, r.text
    return Fixture(org.auth, r.json()["key"]["id"], {"Authorization": f"Bearer {r.json()['secret']}"})


def _ops(http) -> list[Op]:
    return [Op("revoke", lambda f: http.post(f"/v1/keys/{f.key}/revoke", json={}, headers=f.owner), "RevokeApiKey"),
            Op("use", lambda f: http.post("/v1/keys", json={"name": "made-by-k", "scopes": ["chat:read"]},
                                          headers=f.used), "CreateApiKey")]


def _state(http, f: Fixture):
    r = http.get("/v1/keys", params={"limit": 100}, headers=f.owner)
    assert r.status_code == 200, r.text
    return sorted((k["name"], k["revokedAt"] is not None) for k in r.json()["items"])


def _table(http, tenants) -> Table:
    return Table("an API key in use", make=lambda: _fixture(http, tenants), read=lambda f: _state(http, f),
                 ops=_ops(http))


PAIRS = [(a.name, b.name) for a, b in _table(None, None).pairs]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_writes_at_once_answer_as_one_serial_order(http, tenants, a, b):
    table = _table(http, tenants)
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []


def test_the_oracle_tries_every_write_of_a_key():
    """The use is a key's creation (with the key in question as the credential)."""
    service = keys_pb2.DESCRIPTOR.services_by_name["ApiKeyService"]
    assert writes_covered(service, [_table(None, None)], set()) == set()
