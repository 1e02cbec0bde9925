"""Every SCIM write, with each value of its body replaced by each JSON type, answers a SCIM error or a success,
never a 5xx (an oracle over bodies nobody listed: an identity provider sends any JSON, and a value read as the
type it should have had was a 500; tests/json_shapes.py). Through Envoy, as an IdP calls."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from json_shapes import variants
from scim_client import GROUP, PATCH, USER

_ids = itertools.count()


def _user() -> dict[str, Any]:
    n = next(_ids)
    return {"schemas": [USER], "userName": f"typed{n}@example.com", "externalId": f"ext-{n}", "active": True,
            "displayName": "Ada Typed", "name": {"givenName": "Ada", "familyName": "Typed"},
            "emails": [{"value": f"typed{n}@example.com", "type": "work", "primary": True}],
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"manager": {"value": "x"},
                                                                            "department": "Ops"}}


def _group(member: str) -> dict[str, Any]:
    return {"schemas": [GROUP], "displayName": f"Typed group {next(_ids)}", "externalId": f"g-{next(_ids)}",
            "members": [{"value": member}]}


def _no_server_error(scim: Any, method: str, path: str, bodies: Any) -> None:
    failed = []
    for what, body in bodies:
        r = scim.call(method, path, body)
        if r.status_code >= 500:
            failed.append(f"{method} {what}: {r.status_code} {r.text[:200]}")
    assert not failed, "\n".join(failed)


@pytest.fixture(scope="module")
def member(scim) -> str:
    return scim.user(f"member{next(_ids)}@example.com")["id"]


def test_a_user_of_any_shape_is_never_a_server_error(scim):
    _no_server_error(scim, "POST", "/Users", variants(_user()))
    target = scim.user(f"put{next(_ids)}@example.com")["id"]
    _no_server_error(scim, "PUT", f"/Users/{target}", variants(_user()))


def test_a_group_of_any_shape_is_never_a_server_error(scim, member):
    _no_server_error(scim, "POST", "/Groups", variants(_group(member)))
    target = scim.group(f"Put target {next(_ids)}", [member])["id"]
    _no_server_error(scim, "PUT", f"/Groups/{target}", variants(_group(member)))


@pytest.mark.parametrize("kind", ["Users", "Groups"])
def test_a_patch_of_any_shape_is_never_a_server_error(scim, member, kind):
    target = (scim.user(f"patch{next(_ids)}@example.com")["id"] if kind == "Users"
              else scim.group(f"Patch target {next(_ids)}", [member])["id"])
    operations = {
        "Users": [{"op": "replace", "path": "active", "value": False},
                  {"op": "replace", "value": {"displayName": "New", "name.givenName": "Neo"}},
                  {"op": "add", "path": "emails[type eq \"work\"].value", "value": "w@example.com"},
                  {"op": "remove", "path": "externalId"}],
        "Groups": [{"op": "add", "path": "members", "value": [{"value": member}]},
                   {"op": "remove", "path": f"members[value eq \"{member}\"]"},
                   {"op": "replace", "value": {"displayName": "Renamed"}}],
    }[kind]
    for operation in operations:
        body = {"schemas": [PATCH], "Operations": [operation]}
        _no_server_error(scim, "PATCH", f"/{kind}/{target}", variants(body))
