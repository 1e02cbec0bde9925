"""SCIM users' writes at once answer as one serial order would (tests/oracle.py), through Envoy: two users
PUT to one new e-mail address (the second to come keeps its own address, as it does one after the other,
rather than a 409 from the unique index), and either PUT beside the DELETE of the first user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair, writes_covered
from persona.v1 import scim_pb2
from scim_client import USER


@dataclass(frozen=True)
class Fixture:
    a: str
    b: str
    a_name: str
    b_name: str
    address: str  # the new address both PUTs give


def _fixture(scim) -> Fixture:
    tag = uuid.uuid4().hex[:10]
    a, b = f"a-{tag}@example.com", f"b-{tag}@example.com"
    made = [scim.user(name, emails=[{"value": name, "primary": True}]) for name in (a, b)]
    return Fixture(made[0]["id"], made[1]["id"], a, b, f"new-{tag}@example.com")


def _put(scim, which: str):
    def call(f: Fixture):
        user, name = (f.a, f.a_name) if which == "a" else (f.b, f.b_name)
        return scim.call("PUT", f"/Users/{user}", {"schemas": [USER], "userName": name,
                                                   "emails": [{"value": f.address, "primary": True}]})
    return call


def _patch(scim):
    def call(f: Fixture):
        return scim.patch(f"/Users/{f.b}", {"op": "replace", "path": "emails",
                                            "value": [{"value": f.address, "primary": True}]})
    return call


def _state(scim, f: Fixture):
    """Each user's addresses, as which of the fixture's they are (the fixture's tag aside)."""
    known = {f.address: "new", f.a_name: "a", f.b_name: "b"}

    def one(user: str):
        got = scim.call("GET", f"/Users/{user}")
        return "gone" if got.status_code == 404 else [known.get(e["value"], "?") for e in got.json().get("emails", [])]
    return one(f.a), one(f.b)


def _table(scim) -> Table:
    return Table("two SCIM users, one new address", make=lambda: _fixture(scim), read=lambda f: _state(scim, f),
                 ops=[Op("put-a", _put(scim, "a"), "ReplaceScimUser"), Op("put-b", _put(scim, "b"), "ReplaceScimUser"),
                      Op("patch-b", _patch(scim), "PatchScimUser"),
                      Op("delete-a", lambda f: scim.call("DELETE", f"/Users/{f.a}"), "DeleteScimUser")])


PAIRS = [(a.name, b.name) for a, b in _table(None).pairs]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_writes_at_once_answer_as_one_serial_order(scim, a, b):
    table = _table(scim)
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []


def test_the_oracle_tries_every_write_of_a_user():
    """Of the SCIM service's writes, a user's (groups are an aggregate of their own, not in the oracle yet)."""
    service = scim_pb2.DESCRIPTOR.services_by_name["ScimService"]
    missing = writes_covered(service, [_table(None)], {"CreateScimUser"})
    assert {name for name in missing if "ScimUser" in name} == set()
