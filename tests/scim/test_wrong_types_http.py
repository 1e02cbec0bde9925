"""Every SCIM write (and search), with each value of its body replaced by each JSON type, answers a SCIM error or a success,
never a 5xx (an oracle over bodies nobody listed: an identity provider sends any JSON, and a value read as the
type it should have had was a 500; tests/json_shapes.py). Through Envoy, as an IdP calls."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from json_shapes import variants
from scim_client import GROUP, PATCH, USER

SEARCH = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"

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


def test_a_search_of_any_shape_is_never_a_server_error(scim):
    # Issue 47 (typed SCIM documents): `"schemas": 7` (`in` on a number) and `"attributes": [7]` (a join of
    # numbers) were 500s.
    search = {"schemas": [SEARCH], "filter": 'userName sw "typed"', "startIndex": 1, "count": 5,
              "attributes": ["userName", "emails.value"], "excludedAttributes": "name", "sortBy": "userName",
              "sortOrder": "descending"}
    _no_server_error(scim, "POST", "/Users/.search", variants(search))


def test_search_numbers_past_any_integer(scim):
    # JSON's 1e999 reads as a float's infinity, which int() cannot take (OverflowError): it was a 500.
    for field in ("startIndex", "count"):
        for number in ("1e999", "-1e999"):
            r = scim.call("POST", "/Users/.search", f'{{"filter": "userName pr", "{field}": {number}}}')
            assert r.status_code == 422 and r.json()["scimType"] == "invalidValue", (field, number, r.text[:200])
            assert r.json()["detail"] == "startIndex and count are integers."
    # A startIndex past any row (past Postgres' bigint OFFSET, a 500 too) is an empty page.
    for start in (1e300, 2**63, 2**63 - 1):
        r = scim.call("POST", "/Users/.search", {"startIndex": start, "count": 1})
        assert r.status_code == 200 and r.json()["Resources"] == [] and r.json()["startIndex"] == int(start), r.text


def test_patches_that_were_server_errors(scim, member):
    # Issue 47: a filter given as a PATCH path, a value filter matching nothing with a value that is not an object,
    # and one describing no element, were 500s.
    user = scim.user(f"quirk{next(_ids)}@example.com")["id"]
    for path in ('userName eq "x"', "emails pr"):
        r = scim.patch(f"/Users/{user}", {"op": "replace", "path": path, "value": "x"})
        assert r.status_code == 400 and r.json()["scimType"] == "invalidPath", (path, r.text[:200])
        assert r.json()["detail"] == f"The path {path!r} is a filter, not an attribute path."
    for value in ("x", 7, True, [7]):
        r = scim.patch(f"/Users/{user}", {"op": "add", "path": 'emails[type eq "pager"]', "value": value})
        assert r.status_code == 422 and r.json()["scimType"] == "invalidValue", (value, r.text[:200])
    r = scim.patch(f"/Users/{user}", {"op": "add", "path": "emails[value eq null]", "value": {}})
    assert r.status_code == 400 and r.json()["scimType"] == "noTarget", r.text[:200]
    # A list takes its first element, as a replacement through a matching filter does.
    r = scim.patch(f"/Users/{user}", {"op": "add", "path": 'emails[type eq "pager"]',
                                      "value": [{"value": "pager@example.com"}]})
    assert r.status_code == 200 and r.json()["emails"] == [{"type": "pager", "value": "pager@example.com"}], r.text
    group = scim.group(f"Quirk group {next(_ids)}", [member])["id"]
    r = scim.patch(f"/Groups/{group}", {"op": "add", "path": 'members[value eq "x"]', "value": True})
    assert r.status_code == 422 and r.json()["scimType"] == "invalidValue", r.text[:200]
