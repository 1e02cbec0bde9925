"""An API key's writes at once answer as one serial order would (tests/oracle.py), through Envoy: the owner
revoking a key, and the key used for a write (it creates another key), each pair fired together behind a barrier
and compared with both serial orders (which keys the workspace holds, and which are revoked)."""

from __future__ import annotations

from dataclasses import dataclass

from oracle import Op, body, fixture_body, new_org, org_pair_test, org_table, revocations, uncovered

SCOPES = ["personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write"]


@dataclass(frozen=True)
class Fixture:
    owner: dict[str, str]
    key: str
    used: dict[str, str]  # the key's own bearer


def _fixture(http, tenants) -> Fixture:
    # State: the name (the state lists the keys by name; the generator's is new each run) and every scope but the
    # platform's (the key in use makes a key, which the generator's one read scope may not).
    made_with = fixture_body("CreateApiKey", state={"name": "k", "scopes": SCOPES})
    owner, made = new_org(http, tenants, "pro", "POST", "/v1/keys", made_with)
    return Fixture(owner, made["key"]["id"], {"Authorization": f"Bearer {made['secret']}"})


def _ops(http) -> list[Op]:
    return [Op("revoke", lambda f: http.post(f"/v1/keys/{f.key}/revoke", json=body("RevokeApiKey"), headers=f.owner),
               "RevokeApiKey"),
            # Distinguishing: the name (the state lists the keys by name; the generator's is new each run).
            Op("use", lambda f: http.post("/v1/keys", json=body("CreateApiKey", distinguishing={"name": "made-by-k"}),
                                          headers=f.used), "CreateApiKey")]


_table = org_table("an API key in use", _fixture, lambda http, f: revocations(http, "/v1/keys", f.owner), _ops)
test_two_writes_at_once_answer_as_one_serial_order = org_pair_test(_table)


def test_the_oracle_tries_every_write_of_a_key():
    """The use is a key's creation (with the key in question as the credential)."""
    assert uncovered("ApiKeyService", [_table(None, None)]) == set()
