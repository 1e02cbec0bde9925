"""What Microsoft Entra ID and Okta really send, each a test through Envoy."""

from __future__ import annotations

import uuid

from scim_client import USER


def _name() -> str:
    return f"idp-{uuid.uuid4().hex[:10]}@example.com"


def test_entra_pascal_case_ops_and_string_booleans(scim):
    user = scim.user(_name(), displayName="Old")
    r = scim.patch(f"/Users/{user['id']}",
                   {"op": "Replace", "path": "displayName", "value": "New"},
                   {"op": "Add", "path": 'emails[type eq "work"].value', "value": "new@work.example"},
                   {"op": "Replace", "path": "active", "value": "False"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["displayName"] == "New" and body["active"] is False
    assert body["emails"] == [{"type": "work", "value": "new@work.example"}]
    back = scim.patch(f"/Users/{user['id']}", {"op": "Replace", "value": {"active": "True"}})
    assert back.json()["active"] is True


def test_entra_remove_members_with_a_value_list_really_removes_them(scim):
    a, b, c = (scim.user(_name())["id"] for _ in range(3))
    group = scim.group(f"team-{uuid.uuid4().hex[:8]}", [a, b, c])
    r = scim.patch(f"/Groups/{group['id']}", {"op": "Remove", "path": "members", "value": [{"value": a}, {"value": c}]})
    assert r.status_code == 200, r.text
    assert [m["value"] for m in r.json()["members"]] == [b]
    stored = scim.call("GET", f"/Groups/{group['id']}").json()
    assert [m["value"] for m in stored["members"]] == [b]
    assert scim.find("/Groups", f'members.value eq "{a}"')["totalResults"] == 0
    assert [g["value"] for g in scim.call("GET", f"/Users/{b}").json()["groups"]] == [group["id"]]
    assert "groups" not in scim.call("GET", f"/Users/{a}").json()


def test_entra_add_members_and_remove_by_value_filter(scim):
    a, b = (scim.user(_name())["id"] for _ in range(2))
    group = scim.group(f"team-{uuid.uuid4().hex[:8]}")
    added = scim.patch(f"/Groups/{group['id']}", {"op": "Add", "path": "members", "value": [{"value": a}, {"value": b}]})
    assert sorted(m["value"] for m in added.json()["members"]) == sorted([a, b])
    removed = scim.patch(f"/Groups/{group['id']}", {"op": "remove", "path": f'members[value eq "{a}"]'})
    assert [m["value"] for m in removed.json()["members"]] == [b]


def test_entra_query_parameter_is_ignored(scim):
    user = scim.user(_name())
    r = scim.http.get("/v1/auth/scim/v2/Users", params={"filter": f'userName eq "{user["userName"]}"',
                                                         "aadOptscim062020": ""},
                      headers={"Authorization": f"Bearer {scim.token}"})
    assert r.status_code == 200 and r.json()["totalResults"] == 1


def test_okta_looks_up_by_user_name_then_creates(scim):
    name = _name()
    assert scim.find("/Users", f'userName eq "{name}"', startIndex=1, count=100)["totalResults"] == 0
    made = scim.user(name, name={"givenName": "Olga", "familyName": "Kta"}, active=True,
                     emails=[{"primary": True, "value": name, "type": "work"}])
    found = scim.find("/Users", f'userName eq "{name}"', startIndex=1, count=100)
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == made["id"]


def test_okta_deactivates_with_put_and_with_patch(scim):
    user = scim.user(_name(), active=True)
    body = {"schemas": [USER], "userName": user["userName"], "active": False}
    assert scim.call("PUT", f"/Users/{user['id']}", body).json()["active"] is False
    assert scim.call("PUT", f"/Users/{user['id']}", body | {"active": True}).json()["active"] is True
    r = scim.patch(f"/Users/{user['id']}", {"op": "replace", "value": {"active": False}})
    assert r.json()["active"] is False


ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def test_entra_sends_the_manager_as_a_bare_id(scim):
    # Issue #27: Entra's PATCH of the enterprise `manager` with the id as a string was a 422.
    boss, other = scim.user(_name())["id"], scim.user(_name())["id"]
    user = scim.user(_name())
    path = f"/Users/{user['id']}"
    r = scim.patch(path, {"op": "Replace", "path": f"{ENTERPRISE}:manager", "value": boss})
    assert r.status_code == 200, r.text
    assert r.json()[ENTERPRISE]["manager"] == {"value": boss}
    assert scim.call("GET", path).json()[ENTERPRISE]["manager"] == {"value": boss}
    r = scim.patch(path, {"op": "Add", "path": f"{ENTERPRISE}:manager", "value": {"value": other}})
    assert r.json()[ENTERPRISE]["manager"] == {"value": other}
    assert scim.find("/Users", f'{ENTERPRISE}:manager.value eq "{other}"')["Resources"][0]["id"] == user["id"]
    r = scim.patch(path, {"op": "Replace", "path": f"{ENTERPRISE}:manager", "value": ""})  # unassigns it
    assert r.status_code == 200 and ENTERPRISE not in r.json()
    made = scim.user(_name(), schemas=[USER, ENTERPRISE], **{ENTERPRISE: {"manager": boss, "department": "R&D"}})
    assert made[ENTERPRISE] == {"manager": {"value": boss}, "department": "R&D"}


def test_entra_path_less_patch_with_dotted_and_urn_keys(scim):
    boss = scim.user(_name())["id"]
    user = scim.user(_name(), name={"givenName": "Old", "familyName": "Name"})
    r = scim.patch(f"/Users/{user['id']}", {"op": "Replace", "value": {
        "name.givenName": "New", f"{ENTERPRISE}:department": "Research", f"{ENTERPRISE}:manager": boss,
        'emails[type eq "work"].value': "w@work.example", "active": "False", "id": user["id"]}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == {"givenName": "New", "familyName": "Name"} and body["active"] is False
    assert body[ENTERPRISE] == {"department": "Research", "manager": {"value": boss}}
    assert body["emails"] == [{"type": "work", "value": "w@work.example"}] and body["id"] == user["id"]


def test_entra_string_booleans_on_create(scim):
    made = scim.user(_name(), active="False", emails=[{"value": "x@y.example", "primary": "True"}])
    assert made["active"] is False and made["emails"][0]["primary"] is True


def test_okta_renames_a_group_and_deactivates_with_the_id_in_the_value(scim):
    group = scim.group(f"team-{uuid.uuid4().hex[:8]}")
    new = f"renamed-{uuid.uuid4().hex[:8]}"
    r = scim.patch(f"/Groups/{group['id']}", {"op": "replace", "value": {"id": group["id"], "displayName": new}})
    assert r.status_code == 200 and r.json()["displayName"] == new
    user = scim.user(_name())
    r = scim.patch(f"/Users/{user['id']}", {"op": "replace", "value": {"id": user["id"], "active": False}})
    assert r.status_code == 200 and r.json()["active"] is False


def test_entra_reads_groups_without_members(scim):
    a = scim.user(_name())["id"]
    group = scim.group(f"team-{uuid.uuid4().hex[:8]}", [a])
    found = scim.find("/Groups", f'displayName eq "{group["displayName"]}"', excludedAttributes="members")
    assert found["totalResults"] == 1 and "members" not in found["Resources"][0]


def test_patch_member_names_in_any_case(scim):
    # Some IdPs write the PatchOp's members as `operations`, `Op`, `Path`, `Value`.
    user = scim.user(_name())
    r = scim.call("PATCH", f"/Users/{user['id']}", {"operations": [
        {"Op": "Replace", "Path": "displayName", "Value": "Cased"}]})
    assert r.status_code == 200 and r.json()["displayName"] == "Cased", r.text
