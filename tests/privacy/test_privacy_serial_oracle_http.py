"""A member's privacy writes at once answer as one serial order would (tests/oracle.py), through Envoy: the
member's export request and erasure of their data, each pair fired together behind a barrier and compared with
both serial orders (how many exports the member holds, whether they are still a member, and whether their keys
still work)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, params, uncovered
from sqlalchemy import text


@dataclass(frozen=True)
class Fixture:
    org_id: str
    user_id: str
    auth: dict[str, str]  # the member's key


def _fixture(engine, tenants) -> Fixture:
    """A member (not the owner: the owner may not erase) of a new organization, with a key of their own."""
    member = tenants.member()
    return Fixture(member.org_id, member.user_id, member.auth)


def _ops(http) -> list[Op]:
    return [Op("export", lambda f: http.post("/v1/privacy/exports", json=body("CreatePrivacyExport"), headers=f.auth),
               "CreatePrivacyExport"),
            Op("erase", lambda f: http.delete("/v1/privacy/me", headers=f.auth), "EraseMyData")]


def _state(engine, f: Fixture):
    """The member's exports (any status: the runner builds them meanwhile), membership and live keys. From the
    tables: after an erasure the member has no credential to read them with."""
    with engine.connect() as conn:
        exports, members, keys = conn.execute(text(
            "SELECT (SELECT count(*) FROM privacy_exports WHERE org_id = :o AND user_id = :u),"
            " (SELECT count(*) FROM memberships WHERE org_id = :o AND user_id = :u),"
            " (SELECT count(*) FROM api_keys WHERE org_id = :o AND created_by_user_id = :u AND revoked_at IS NULL)"),
            {"o": f.org_id, "u": f.user_id}).one()
    return exports, members, keys


def _table(http, engine, tenants) -> Table:
    return Table("a member of an organization", make=lambda: _fixture(engine, tenants),
                 read=lambda f: _state(engine, f), ops=_ops(http))


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, engine, tenants, a, b):
    assert check_named(_table(http, engine, tenants), a, b) == []


def test_the_oracle_tries_every_write_of_a_members_privacy():
    assert uncovered("PrivacyService", [_table(None, None, None)]) == set()
