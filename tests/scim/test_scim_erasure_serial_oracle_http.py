"""A person's erasure beside a write of a SCIM group they are in answers as one serial order would
(tests/oracle.py), through Envoy, and without a deadlock: the erasure (privacy's EraseMyData) fired with the
group's PATCH adding another member, the PATCH removing the person, a rename, its PUT and its DELETE, each pair
many times on fresh groups. A group write locks its group, its members' SCIM users, then their memberships
(`regrant`); the erasure takes the groups the person is in and their SCIM user before their membership (the SCIM
module's `lock_personal_data`), the same order. Taken the other way round, the two met in a cycle that PostgreSQL
broke (40P01) and the `Commit` stage hid by running the aborted call again: its answers were still a serial
order's, so besides the end state each pair checks that no call ran again (`races.reruns`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from oracle import ROUNDS, Op, Table, body, check_named, fixture_body, params
from races import reruns
from sqlalchemy import text
from support import SCOPES

# Each pair's concurrent runs: a cycle needs the two to interleave, which one run meets by chance only.
PAIR_ROUNDS = max(ROUNDS, 6)


@dataclass(frozen=True)
class Fixture:
    tag: str
    org_id: str
    person: str  # a SCIM user in the group, who erases their data with a key of their own
    other: str  # a SCIM user outside it
    group: str
    auth: dict[str, str]


def _fixture(scim, tenants, org) -> Fixture:
    tag = uuid.uuid4().hex[:10]
    # (The generator's users: new names, which the state does not read.) State: the group's name (the state reads
    # it; new per fixture) and its member, the person.
    person, other = (scim.created("/Users", fixture_body("CreateScimUser"))["id"] for _ in range(2))
    key = tenants.key(org.org_id, org.workspace_id, person, org.plan, list(SCOPES))
    group = scim.created("/Groups", fixture_body("CreateScimGroup", state={
        "displayName": f"g-{tag}", "members": [{"value": person}]}))["id"]
    return Fixture(tag, org.org_id, person, other, group, {"Authorization": f"Bearer {key}"})


def _ops(http, scim) -> list[Op]:
    # The state reads the group's members and name: a SCIM document (which the contract does not describe: the
    # generator gives its schema and a new name) is all distinguishing but its `schemas`.
    def patch(operation):
        return lambda f: scim.call("PATCH", f"/Groups/{f.group}", body(
            "PatchScimGroup", distinguishing={"Operations": [operation(f)]}))

    return [
        Op("erase", lambda f: http.delete("/v1/privacy/me", headers=f.auth), "EraseMyData"),
        Op("add-other", patch(lambda f: {"op": "add", "path": "members", "value": [{"value": f.other}]}),
           "PatchScimGroup"),
        Op("remove-person", patch(lambda f: {"op": "remove", "path": f'members[value eq "{f.person}"]'}),
           "PatchScimGroup"),
        Op("rename", patch(lambda f: {"op": "replace", "path": "displayName", "value": f"h-{f.tag}"}),
           "PatchScimGroup"),
        Op("put-both", lambda f: scim.call("PUT", f"/Groups/{f.group}", body("ReplaceScimGroup", distinguishing={
            "displayName": f"g-{f.tag}", "members": [{"value": f.person}, {"value": f.other}]})), "ReplaceScimGroup"),
        Op("delete-group", lambda f: scim.call("DELETE", f"/Groups/{f.group}"), "DeleteScimGroup"),
    ]


def _state(scim, engine, f: Fixture):
    """The group (its name's prefix and members, by label), whether the person is still a SCIM user and a member
    of the organization (from the table: their key is revoked by the erasure), and the other's role."""
    labels = {f.person: "person", f.other: "other"}
    got = scim.call("GET", f"/Groups/{f.group}")
    group = "gone" if got.status_code == 404 else (
        got.json()["displayName"].split("-")[0], sorted(labels.get(m["value"], "?") for m in got.json().get("members", [])))
    with engine.connect() as conn:
        members = conn.execute(text("SELECT user_id, role FROM memberships WHERE org_id = :o AND user_id IN (:p, :q)"),
                               {"o": f.org_id, "p": f.person, "q": f.other}).all()
    return group, scim.call("GET", f"/Users/{f.person}").status_code, sorted((labels[u], r) for u, r in members)


def _table(http, scim, engine, tenants, org) -> Table:
    table = Table("a person in a SCIM group: their erasure beside the group's writes",
                  make=lambda: _fixture(scim, tenants, org), read=lambda f: _state(scim, engine, f),
                  ops=_ops(http, scim))
    erase, *group_writes = table.ops
    table.pairs = [(erase, write) for write in group_writes]  # (the group's writes among themselves: its own table)
    return table


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None, None, None)))
def test_an_erasure_beside_a_group_write_answers_as_one_serial_order_without_a_rerun(
        stack, http, scim, engine, tenants, org, a, b):
    before = reruns(stack)
    assert check_named(_table(http, scim, engine, tenants, org), a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"
