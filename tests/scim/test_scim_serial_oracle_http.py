"""SCIM users' writes at once answer as one serial order would (tests/oracle.py), through Envoy.

Two users and one new e-mail address: each PUT to the address (the second to come keeps its own address in the
user record, as it does one after the other, rather than a 409 from the unique index: issue 45's row 8), a PATCH
replacing the second's e-mails with it, a PATCH adding a work address to the first and one removing it, the
first's deactivation, a PUT of the second to the first's userName and e-mail, a new user POSTed with the new
address, and the DELETE of the first. And a deactivated user in a group: reactivated, PUT, PATCHed, deleted, and
the other user PUT to its userName. The end state is each user's userName, active flag, e-mails (as the fixture's
labels) and groups, the new user if any, and whether the new address names a SCIM user of the organization (a
create with it answers 409 `uniqueness` then)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, fixture_body, params, uncovered
from scim_client import USER


@dataclass(frozen=True)
class Fixture:
    tag: str
    a: str
    b: str
    a_name: str
    b_name: str
    address: str  # the new address the PUTs give
    work: str  # the work address a PATCH adds to the first user
    group: str = ""  # (the inactive state: the group the first user is in)


def _fixture(scim, inactive_in_group: bool = False) -> Fixture:
    tag = uuid.uuid4().hex[:10]
    a, b = f"a-{tag}@example.com", f"b-{tag}@example.com"
    # State: each user's name and address (the operations reuse them, the state reads them) and, in the inactive
    # state, the first deactivated; the group's name (new per fixture: names are unique) and its member.
    made = [scim.created("/Users", fixture_body("CreateScimUser", state={
        "userName": name, "emails": [{"value": name, "primary": True}], **({"active": False} if inactive else {})}))
            for name, inactive in ((a, inactive_in_group), (b, False))]
    group = scim.created("/Groups", fixture_body("CreateScimGroup", state={
        "displayName": f"g-{tag}", "members": [{"value": made[0]["id"]}]}))["id"] if inactive_in_group else ""
    return Fixture(tag, made[0]["id"], made[1]["id"], a, b, f"new-{tag}@example.com", f"work-{tag}@example.com",
                   group)


# The state reads each user's name, addresses, `active` and groups: a SCIM document (which the contract does not
# describe: the generator gives its schema and a new userName) is all distinguishing but its `schemas`.
def _user(rpc: str, user_name: str, address: str) -> dict:
    return body(rpc, distinguishing={"userName": user_name, "emails": [{"value": address, "primary": True}]})


def _put(scim, which: str):
    def call(f: Fixture):
        user, name = (f.a, f.a_name) if which == "a" else (f.b, f.b_name)
        return scim.call("PUT", f"/Users/{user}", _user("ReplaceScimUser", name, f.address))
    return call


def _patch(scim, which: str, *operations):
    return lambda f: scim.call("PATCH", f"/Users/{f.a if which == 'a' else f.b}", body(
        "PatchScimUser", distinguishing={"Operations": [op(f) for op in operations]}))


def _ops(scim) -> list[Op]:
    return [
        Op("put-a", _put(scim, "a"), "ReplaceScimUser"),
        Op("put-b", _put(scim, "b"), "ReplaceScimUser"),
        Op("patch-b", _patch(scim, "b", lambda f: {"op": "replace", "path": "emails",
                                                   "value": [{"value": f.address, "primary": True}]}),
           "PatchScimUser"),
        Op("delete-a", lambda f: scim.call("DELETE", f"/Users/{f.a}"), "DeleteScimUser"),
        Op("add-work-a", _patch(scim, "a", lambda f: {"op": "add", "path": "emails",
                                                      "value": [{"value": f.work, "type": "work"}]}),
           "PatchScimUser"),
        Op("remove-work-a", _patch(scim, "a", lambda f: {"op": "remove", "path": 'emails[type eq "work"]'}),
           "PatchScimUser"),
        Op("deactivate-a", _patch(scim, "a", lambda f: {"op": "replace", "path": "active", "value": False}),
           "PatchScimUser"),
        Op("put-b-as-a", lambda f: scim.call("PUT", f"/Users/{f.b}", _user("ReplaceScimUser", f.a_name, f.a_name)),
           "ReplaceScimUser"),
        Op("create-c", lambda f: scim.call("POST", "/Users", _user("CreateScimUser", f"c-{f.tag}@example.com",
                                                                   f.address)), "CreateScimUser"),
    ]


def _inactive_ops(scim) -> list[Op]:
    ops = {op.name: op for op in _ops(scim)}
    return [Op("reactivate-a", _patch(scim, "a", lambda f: {"op": "replace", "path": "active", "value": True}),
               "PatchScimUser"),
            ops["put-a"], ops["add-work-a"], ops["delete-a"], ops["put-b-as-a"]]


def _state(scim, f: Fixture):
    """Each user (and the new one) as the fixture's labels, then whether the new address names a SCIM user."""
    known = {f.address: "new", f.a_name: "a", f.b_name: "b", f.work: "work", f"c-{f.tag}@example.com": "c"}
    labels = {f.group: "g"}

    def shown(body: dict):
        return (known.get(body["userName"], "?"), body.get("active", True),
                sorted(known.get(e["value"], "?") for e in body.get("emails", [])),
                sorted(labels.get(g["value"], "?") for g in body.get("groups", [])))

    def one(user: str):
        got = scim.call("GET", f"/Users/{user}")
        return "gone" if got.status_code == 404 else shown(got.json())

    made = [shown(u) for u in scim.find("/Users", f'userName eq "c-{f.tag}@example.com"')["Resources"]]
    probe = scim.call("POST", "/Users", {"schemas": [USER], "userName": f"p-{f.tag}@example.com",
                                         "emails": [{"value": f.address, "primary": True}]})
    return one(f.a), one(f.b), made, probe.status_code


def _table(scim) -> Table:
    return Table("two SCIM users, one new address", make=lambda: _fixture(scim), read=lambda f: _state(scim, f),
                 ops=_ops(scim))


def _table_inactive(scim) -> Table:
    return Table("a deactivated SCIM user in a group, another user", make=lambda: _fixture(scim, True),
                 read=lambda f: _state(scim, f), ops=_inactive_ops(scim))


@pytest.mark.parametrize(("a", "b"), params(_table(None)))
def test_two_writes_at_once_answer_as_one_serial_order(scim, a, b):
    assert check_named(_table(scim), a, b) == []


@pytest.mark.parametrize(("a", "b"), params(_table_inactive(None)))
def test_two_writes_of_a_deactivated_member_at_once_answer_as_one_serial_order(scim, a, b):
    assert check_named(_table_inactive(scim), a, b) == []


def test_the_oracle_tries_every_write_of_a_user():
    """Of the SCIM service's writes, a user's, its create included (a new user given an address a PUT gives at
    the same moment); groups are an aggregate of their own (tests/scim/test_scim_group_serial_oracle_http.py)."""
    assert uncovered("ScimService", [_table(None), _table_inactive(None)], only="ScimUser") == set()
