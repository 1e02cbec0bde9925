"""The SCIM protocol through Envoy, beyond what scim2-tester covers: media
types, errors in SCIM's schema (422 with the envelope too), filters,
pagination, attribute selection, ETags and If-Match, unknown paths."""

from __future__ import annotations

import uuid

import pytest
from scim_client import ERROR, GROUP, SCIM, USER


def _name(prefix: str = "u") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}@example.com"


def test_create_answers_201_with_location_etag_and_the_scim_media_type(scim):
    r = scim.call("POST", "/Users", {"schemas": [USER], "userName": (name := _name()), "active": True,
                                     "emails": [{"value": name, "primary": True}]})
    assert r.status_code == 201, r.text
    assert r.headers["content-type"] == SCIM
    user = r.json()
    assert r.headers["location"] == user["meta"]["location"]
    assert r.headers["location"].endswith(f"/v1/auth/scim/v2/Users/{user['id']}")
    assert r.headers["etag"] == user["meta"]["version"] == 'W/"1"'
    assert user["schemas"] == [USER] and user["userName"] == name and user["meta"]["resourceType"] == "User"
    got = scim.call("GET", f"/Users/{user['id']}")
    assert got.status_code == 200 and got.headers["content-type"] == SCIM and got.json() == user


def test_application_json_is_accepted_and_other_media_types_are_not(scim):
    body = {"schemas": [USER], "userName": _name()}
    assert scim.call("POST", "/Users", body, **{"Content-Type": "application/json"}).status_code == 201
    r = scim.call("POST", "/Users", "userName=x", **{"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json()["schemas"] == [ERROR]


def test_validation_errors_are_422_in_both_shapes(scim):
    # The spec's POST /Groups: 422 in the envelope; SCIM clients read SCIM's schema.
    r = scim.call("POST", "/Groups", {"schemas": [GROUP], "members": "nobody"})
    assert r.status_code == 422 and r.headers["content-type"] == SCIM
    body = r.json()
    assert body["schemas"] == [ERROR] and body["status"] == "422" and body["scimType"] == "invalidValue"
    assert body["error"]["code"] == "validation_failed" and body["error"]["message"] == body["detail"]
    paths = {v["path"] for v in body["error"]["details"]["violations"]}
    assert paths == {"displayName", "members"}


def test_malformed_json_is_400_invalid_syntax(scim):
    r = scim.call("POST", "/Users", "{not json")
    assert r.status_code == 400 and r.json()["scimType"] == "invalidSyntax"


def test_user_names_are_unique_case_insensitively(scim):
    name = _name()
    scim.user(name)
    r = scim.call("POST", "/Users", {"schemas": [USER], "userName": name.upper()})
    assert r.status_code == 409 and r.json()["scimType"] == "uniqueness" and r.json()["status"] == "409"


def test_unknown_resources_and_paths_answer_scim_404s(scim):
    for path in ("/Users/usr_nobody", "/Groups/grp_nobody", "/Schemas/urn:nope", "/ResourceTypes/Nope",
                 f"/{uuid.uuid4()}"):
        r = scim.call("GET", path)
        assert r.status_code == 404, path
        assert r.headers["content-type"] == SCIM and r.json()["schemas"] == [ERROR] and r.json()["status"] == "404"


def test_discovery_is_read_only(scim):
    spc = scim.call("GET", "/ServiceProviderConfig").json()
    assert spc["patch"]["supported"] and spc["etag"]["supported"] and spc["filter"]["maxResults"] == 1000
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        r = scim.call(method, "/ServiceProviderConfig", {} if method != "DELETE" else None)
        assert r.status_code == 405 and r.headers["allow"] == "GET" and r.json()["status"] == "405"
    assert scim.call("POST", "/.search", {"schemas": []}).status_code == 501


@pytest.fixture(scope="module")
def people(scim):
    """Four users to filter, with a shared tag in their names."""
    tag = uuid.uuid4().hex[:8]
    made = [
        scim.user(f"ada.{tag}@example.com", externalId=f"ext-ada-{tag}", displayName=f"Ada {tag}",
                  emails=[{"value": f"ada.{tag}@work.example", "type": "work", "primary": True}]),
        scim.user(f"bob.{tag}@example.com", externalId=f"ext-bob-{tag}", displayName=f"Bob {tag}",
                  emails=[{"value": f"bob.{tag}@home.example", "type": "home"}], active=False),
        scim.user(f"cyd.{tag}@example.com", displayName=f"Cyd {tag}", name={"givenName": "Cyd", "familyName": "Z"}),
        scim.user(f"dan.{tag}@example.org", displayName=f"Dan {tag}"),
    ]
    return tag, made


def _names(listed) -> list[str]:
    return sorted(u["userName"].split(".")[0] for u in listed["Resources"])


def test_filters(scim, people):
    tag, _ = people
    assert _names(scim.find("/Users", f'userName eq "ADA.{tag}@example.com"')) == ["ada"]
    assert _names(scim.find("/Users", f'externalId eq "ext-bob-{tag}"')) == ["bob"]
    assert scim.find("/Users", f'externalId eq "EXT-BOB-{tag}"')["totalResults"] == 0  # externalId is caseExact
    assert _names(scim.find("/Users", f'displayName co "{tag}" and userName ew ".org"')) == ["dan"]
    assert _names(scim.find("/Users", f'userName sw "cyd.{tag}" or userName sw "dan.{tag}"')) == ["cyd", "dan"]
    assert _names(scim.find("/Users", f'emails.value co "{tag}@work"')) == ["ada"]
    assert _names(scim.find("/Users", f'emails[type eq "home" and value co "{tag}"]')) == ["bob"]
    assert _names(scim.find("/Users", f'displayName co "{tag}" and active eq false')) == ["bob"]
    assert _names(scim.find("/Users", f'displayName co "{tag}" and not (active eq false) and name.givenName pr')) \
        == ["cyd"]


def test_sw_is_a_prefix_case_insensitive_for_user_name_only(scim, people):
    """`sw` is a range on the (lowered) value, not a LIKE: `%` and `_` are
    plain characters, userName ignores case (caseExact false), externalId
    does not, and a prefix ending in a character past ASCII bounds it too."""
    tag, _ = people
    scim.user(f"{tag}_a%z.one@example.com")
    scim.user(f"{tag}xa!z.two@example.com")
    scim.user(f"{tag}é.three@example.com")
    scim.user(f"{tag}ê.four@example.com")

    def found(expression: str) -> list[str]:
        return sorted(u["userName"] for u in scim.find("/Users", expression)["Resources"])

    assert found(f'userName sw "{tag.upper()}_A%"') == [f"{tag}_a%z.one@example.com"]
    assert found(f'userName sw "{tag}É"') == [f"{tag}é.three@example.com"]
    assert len(found(f'userName sw "{tag}"')) == 4
    assert _names(scim.find("/Users", f'externalId sw "ext-ada-{tag[:4]}"')) == ["ada"]
    assert scim.find("/Users", f'externalId sw "EXT-ADA-{tag[:4]}"')["totalResults"] == 0


def test_co_is_a_substring_case_insensitive_with_percent_and_underscore_plain(scim):
    """`co` reads a trigram index (migration 0027) where the needle has a
    trigram and the rows where it has none (1 or 2 characters): the same
    answers either way. `%` and `_` are plain characters; userName and
    displayName ignore case (caseExact false)."""
    tag = uuid.uuid4().hex[:8]  # its own: other tests count the `people` fixture's tag
    one, two = f"co{tag}x_1%z@example.com", f"co{tag}xa1bz@example.com"  # `two` is what wildcards would match
    scim.user(one, displayName=f"Quiz One {tag}")
    scim.user(two, displayName=f"Board Two {tag}")
    scoped = f'userName sw "co{tag}"'

    def found(expression: str) -> list[str]:
        return sorted(u["userName"] for u in scim.find("/Users", expression)["Resources"])

    assert found(f'userName co "{tag.upper()}X_1%Z"') == [one]
    assert found(f'userName co "{tag}xa1bz"') == [two]
    assert found(f'displayName co "QUIZ ONE {tag.upper()}"') == [one]
    assert found(f'displayName co "tWo {tag}"') == [two]
    # Needles with a character no hex tag holds, so only these two users can match.
    for attribute, needle, expected in (("userName", "%", [one]), ("userName", "_", [one]), ("userName", "z", [one, two]),
                                        ("userName", "_1", [one]), ("userName", "BZ", [two]),
                                        ("displayName", "Q", [one]), ("displayName", "r", [two]),
                                        ("displayName", "o", [one, two]), ("displayName", "tW", [two])):
        assert found(f'{scoped} and {attribute} co "{needle}"') == expected, needle
    groups = [scim.group(f"Grp_{tag}%"), scim.group(f"GrpX{tag}Y")]
    assert [g["displayName"] for g in scim.find("/Groups", f'displayName co "grp_{tag.upper()}%"')["Resources"]] \
        == [groups[0]["displayName"]]
    assert scim.find("/Groups", f'displayName co "{tag}"')["totalResults"] == 2


def test_bad_filters_are_400_invalid_filter(scim):
    for bad in ('userName eq', 'nosuch eq "x"', 'userName zz "x"', 'emails.nosuch eq "x"'):
        r = scim.http.get("/v1/auth/scim/v2/Users", params={"filter": bad},
                          headers={"Authorization": f"Bearer {scim.token}"})
        assert r.status_code == 400 and r.json()["scimType"] == "invalidFilter", bad


def test_pagination_and_sorting(scim, people):
    tag, _ = people
    f = f'displayName co "{tag}"'
    page = scim.find("/Users", f, startIndex=2, count=2, sortBy="userName")
    assert page["totalResults"] == 4 and page["startIndex"] == 2 and page["itemsPerPage"] == 2
    assert _names(page) == ["bob", "cyd"]
    assert scim.find("/Users", f, count=0) | {"Resources": []} == {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:ListResponse"], "totalResults": 4, "startIndex": 1,
        "itemsPerPage": 0, "Resources": []}
    down = scim.find("/Users", f, sortBy="userName", sortOrder="descending")
    assert [u["userName"].split(".")[0] for u in down["Resources"]] == ["dan", "cyd", "bob", "ada"]
    search = scim.call("POST", "/Users/.search", {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": f, "startIndex": 4,
        "count": 10, "sortBy": "userName", "attributes": ["userName"]}).json()
    assert search["totalResults"] == 4 and [set(u) for u in search["Resources"]] == [{"schemas", "id", "userName"}]


def test_attributes_and_excluded_attributes(scim, people):
    _, made = people
    ada = made[0]["id"]
    only = scim.http.get(f"/v1/auth/scim/v2/Users/{ada}", params={"attributes": "userName,emails.value"},
                         headers={"Authorization": f"Bearer {scim.token}"}).json()
    assert set(only) == {"schemas", "id", "userName", "emails"} and set(only["emails"][0]) == {"value"}
    without = scim.http.get(f"/v1/auth/scim/v2/Users/{ada}", params={"excludedAttributes": "emails,id"},
                            headers={"Authorization": f"Bearer {scim.token}"}).json()
    assert "emails" not in without and without["id"] == ada  # id is always returned


def test_etags_and_if_match(scim):
    user = scim.user(_name())
    path, v1 = f"/Users/{user['id']}", user["meta"]["version"]
    body = {"schemas": [USER], "userName": user["userName"], "title": "Engineer"}
    r = scim.call("PUT", path, body, **{"If-Match": v1})
    assert r.status_code == 200 and r.headers["etag"] == 'W/"2"' and r.json()["title"] == "Engineer"
    stale = scim.call("PUT", path, body | {"title": "Boss"}, **{"If-Match": v1})
    assert stale.status_code == 412 and stale.json()["schemas"] == [ERROR] and stale.json()["status"] == "412"
    assert scim.patch(path, {"op": "replace", "path": "title", "value": "Boss"}, **{"If-Match": v1}).status_code == 412
    assert scim.call("DELETE", path, **{"If-Match": v1}).status_code == 412
    assert scim.call("GET", path).json()["title"] == "Engineer"
    # An unchanged write keeps the version.
    assert scim.call("PUT", path, body).headers["etag"] == 'W/"2"'
    assert scim.call("DELETE", path, **{"If-Match": 'W/"2"'}).status_code == 204
    assert scim.call("GET", path).status_code == 404


def test_put_clears_what_the_body_leaves_out_and_never_keeps_a_password(scim, engine):
    user = scim.user(_name(), title="Engineer", password="hunter2-secret", nickName="Ace")
    assert "password" not in user and user["title"] == "Engineer"
    r = scim.call("PUT", f"/Users/{user['id']}", {"schemas": [USER], "userName": user["userName"]})
    assert r.status_code == 200 and "title" not in r.json() and "nickName" not in r.json()
    from sqlalchemy import text

    with engine.connect() as conn:
        stored = conn.execute(text("SELECT document::text FROM scim_users WHERE id = :id"), {"id": user["id"]}).scalar()
    assert "hunter2" not in stored


def test_deeply_nested_bodies_are_400_invalid_syntax(scim):
    # Audit #28: a body nested 10,000 deep was a 500 (RecursionError).
    user = scim.user(_name())
    deep = '{"userName": "x", "name": ' + '{"a": ' * 10_000 + "1" + "}" * 10_000 + "}"
    for method, path in (("POST", "/Users"), ("PUT", f"/Users/{user['id']}"), ("PATCH", f"/Users/{user['id']}"),
                         ("POST", "/Groups"), ("POST", "/Users/.search")):
        for body in (deep, "[" * 10_000 + "]" * 10_000, "[" * 40 + "]" * 40):
            r = scim.call(method, path, body)
            assert r.status_code == 400, (method, path, r.text[:200])
            assert r.json()["schemas"] == [ERROR] and r.json()["scimType"] == "invalidSyntax"


def test_deep_and_long_filters_and_paths_are_400s(scim):
    # The other walks over what clients send: filters and PATCH paths nest at most 32 deep.
    user = scim.user(_name())
    nested = "(" * 1000 + 'userName eq "x"' + ")" * 1000
    for bad in ("not (" * 500 + 'userName eq "x"' + ")" * 500, 'userName eq "' + "x" * 14_000 + '"',
                " or ".join(['userName eq "x"'] * 1000), " or ".join(['userName eq "x"'] * 400)):
        r = scim.call("POST", "/Users/.search", {"filter": bad})
        assert r.status_code == 400 and r.json()["scimType"] == "invalidFilter", bad[:40]
        r = scim.http.get("/v1/auth/scim/v2/Users", params={"filter": bad},
                          headers={"Authorization": f"Bearer {scim.token}"})
        if len(str(r.request.url)) > 8192:  # over the edge's URL limit
            assert r.status_code == 431 and r.json()["schemas"] == [ERROR], r.text[:200]
        else:
            assert r.status_code == 400 and r.json()["scimType"] == "invalidFilter", bad[:40]
    assert scim.find("/Users", nested)["totalResults"] == 0  # redundant parentheses are fine
    for path in ("emails[" + "not (" * 800 + 'value eq "x"' + ")" * 800 + "]", "emails[" + nested + "]"):
        r = scim.patch(f"/Users/{user['id']}", {"op": "remove", "path": path})
        assert r.status_code in (200, 400) and r.status_code != 500, r.text[:200]
        if r.status_code == 400:
            assert r.json()["scimType"] == "invalidPath"


def test_date_time_filters(scim, people):
    # Issue #27: every comparison on meta.created / meta.lastModified was a 500.
    tag, made = people
    ada, bob = made[0]["meta"], made[1]["meta"]
    mine = f'displayName co "{tag}"'
    cases = {
        f'meta.created eq "{ada["created"]}"': ["ada"],
        f'meta.created ne "{ada["created"]}"': ["bob", "cyd", "dan"],
        f'meta.created gt "{ada["created"]}"': ["bob", "cyd", "dan"],
        f'meta.created ge "{bob["created"]}"': ["bob", "cyd", "dan"],
        f'meta.created lt "{bob["created"]}"': ["ada"],
        f'meta.created le "{bob["created"]}"': ["ada", "bob"],
        f'meta.lastModified ge "{ada["lastModified"]}"': ["ada", "bob", "cyd", "dan"],
        'meta.lastModified gt "2000-01-01T00:00:00+02:00"': ["ada", "bob", "cyd", "dan"],
        'meta.created lt "2000-01-01T00:00:00"': [],
        "meta.created pr": ["ada", "bob", "cyd", "dan"],
        "meta.lastModified pr": ["ada", "bob", "cyd", "dan"],
    }
    for f, expected in cases.items():
        assert _names(scim.find("/Users", f"{mine} and {f}")) == expected, f
    assert scim.find("/Users", f'meta.created ge "{ada["created"]}"', sortBy="meta.created")["totalResults"] >= 4
    for bad in ('meta.created gt "yesterday"', 'meta.created eq "2024-13-01T00:00:00Z"', "meta.lastModified lt 5",
                'meta.created co "2024"', 'meta.created gt true'):
        r = scim.http.get("/v1/auth/scim/v2/Users", params={"filter": bad},
                          headers={"Authorization": f"Bearer {scim.token}"})
        assert r.status_code == 400 and r.json()["scimType"] == "invalidFilter", (bad, r.text[:200])
    group = scim.group(f"when-{tag}")
    found = scim.find("/Groups", f'meta.created eq "{group["meta"]["created"]}"')
    assert [g["id"] for g in found["Resources"]] == [group["id"]]
