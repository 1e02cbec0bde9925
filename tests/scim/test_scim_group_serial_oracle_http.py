"""A SCIM group's writes at once answer as one serial order would (tests/oracle.py), through Envoy: the group's
PATCHes (a member added, one removed, a rename), its PUT and DELETE, a new group taking the same name, and the
DELETE of a member user (which leaves the group), each pair fired together behind a barrier and compared with
both serial orders."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, fixture_body, params, uncovered


@dataclass(frozen=True)
class Fixture:
    tag: str
    users: tuple[str, str, str]  # u1 (in the group), u2, u3
    group: str


def _fixture(scim) -> Fixture:
    tag = uuid.uuid4().hex[:10]
    # State: the users' names and the group's (the state reads who holds `g-…` and `h-…`; new per fixture) and its
    # first member.
    users = tuple(scim.created("/Users", fixture_body("CreateScimUser", state={"userName": f"u{i}-{tag}@example.com"}))[
        "id"] for i in (1, 2, 3))
    group = scim.created("/Groups", fixture_body("CreateScimGroup", state={
        "displayName": f"g-{tag}", "members": [{"value": users[0]}]}))["id"]
    return Fixture(tag, users, group)  # type: ignore[arg-type]


def _ops(scim) -> list[Op]:
    # The state reads the group's name and members and who holds the name `h-…`: a SCIM document (which the
    # contract does not describe: the generator gives its schema and a new name) is all distinguishing but `schemas`.
    def patch(operations):
        return lambda f: scim.call("PATCH", f"/Groups/{f.group}", body(
            "PatchScimGroup", distinguishing={"Operations": operations(f)}))

    return [
        Op("add-u2", patch(lambda f: [{"op": "add", "path": "members", "value": [{"value": f.users[1]}]}]),
           "PatchScimGroup"),
        Op("remove-u1", patch(lambda f: [{"op": "remove", "path": f'members[value eq "{f.users[0]}"]'}]),
           "PatchScimGroup"),
        Op("rename", patch(lambda f: [{"op": "replace", "path": "displayName", "value": f"h-{f.tag}"}]),
           "PatchScimGroup"),
        Op("put-u3", lambda f: scim.call("PUT", f"/Groups/{f.group}", body("ReplaceScimGroup", distinguishing={
            "displayName": f"g-{f.tag}", "members": [{"value": f.users[2]}]})), "ReplaceScimGroup"),
        Op("create-h", lambda f: scim.call("POST", "/Groups", body(
            "CreateScimGroup", distinguishing={"displayName": f"h-{f.tag}"})), "CreateScimGroup"),
        Op("delete-g", lambda f: scim.call("DELETE", f"/Groups/{f.group}"), "DeleteScimGroup"),
        Op("delete-u1", lambda f: scim.call("DELETE", f"/Users/{f.users[0]}"), "DeleteScimUser"),
    ]


def _state(scim, f: Fixture):
    """The group's name and members, and who holds the name `h-…`, as the fixture's labels."""
    labels = {user: f"u{i}" for i, user in enumerate(f.users, 1)} | {f.group: "g"}
    got = scim.call("GET", f"/Groups/{f.group}")
    group = "gone" if got.status_code == 404 else (
        got.json()["displayName"].split("-")[0], sorted(labels.get(m["value"], "?") for m in got.json().get("members", [])))
    holders = scim.find("/Groups", f'displayName eq "h-{f.tag}"')["Resources"]
    return group, sorted(labels.get(g["id"], "new") for g in holders)


def _table(scim) -> Table:
    return Table("a SCIM group of one member, two users outside it", make=lambda: _fixture(scim),
                 read=lambda f: _state(scim, f), ops=_ops(scim))


@pytest.mark.parametrize(("a", "b"), params(_table(None)))
def test_two_writes_at_once_answer_as_one_serial_order(scim, a, b):
    assert check_named(_table(scim), a, b) == []


def test_the_oracle_tries_every_write_of_a_group():
    assert uncovered("ScimService", [_table(None)], only="ScimGroup") == set()
