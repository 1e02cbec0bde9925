"""A SCIM token's writes at once answer as one serial order would (tests/oracle.py), through Envoy: the owner
revoking the token, the token used for a write (it provisions a user), and a second token made beside it, each
pair fired together behind a barrier and compared with both serial orders (the organization's tokens and which
are revoked, and whether the user was provisioned)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from oracle import Op, body, fixture_body, new_org, org_pair_test, org_table, revocations, uncovered
from scim_client import Scim

TOKENS = "/v1/auth/scim/tokens"

@dataclass(frozen=True)
class Fixture:
    owner: dict[str, str]
    token: str
    secret: str
    user_name: str


def _fixture(http, tenants) -> Fixture:
    # State: the name (the state lists the tokens by name; the generator's is new each run).
    made_with = fixture_body("CreateScimToken", state={"name": "Okta"})
    owner, made = new_org(http, tenants, "enterprise", "POST", TOKENS, made_with)
    return Fixture(owner, made["token"]["id"], made["secret"], f"u-{uuid.uuid4().hex[:10]}@example.com")


def _ops(http) -> list[Op]:
    return [
        Op("revoke", lambda f: http.post(f"{TOKENS}/{f.token}/revoke", json=body("RevokeScimToken"), headers=f.owner),
           "RevokeScimToken"),
        # Distinguishing: the user's name (the state counts the users of that name; the generator's is new each run).
        Op("use", lambda f: Scim(http, f.secret).call("POST", "/Users", body(
            "CreateScimUser", distinguishing={"userName": f.user_name}))),
        # Distinguishing: the name (the state lists the tokens by name; the generator's is new each run).
        Op("create", lambda f: http.post(TOKENS, json=body("CreateScimToken", distinguishing={"name": "Entra"}),
                                         headers=f.owner),
           "CreateScimToken"),
    ]


def _state(http, f: Fixture):
    users = http.get("/v1/auth/scim/v2/Users", params={"filter": f'userName eq "{f.user_name}"'},
                     headers=f.owner).json()["totalResults"]
    return revocations(http, TOKENS, f.owner), users


_table = org_table("a SCIM token in use", _fixture, _state, _ops)
test_two_writes_at_once_answer_as_one_serial_order = org_pair_test(_table)


def test_the_oracle_tries_every_write_of_a_token():
    assert uncovered("ScimTokenService", [_table(None, None)]) == set()
