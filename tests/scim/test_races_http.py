"""SCIM writes at the same moment through Envoy end as some serial order
would: a name two creates race for is one 201 and one 409 `uniqueness`
(never a 500), and a member added while its user is deleted is either
removed by the delete or refused, never left behind; a group PATCH and the
DELETE of one of its members take their locks in one order (groups, then
users), so they never deadlock."""

from __future__ import annotations

import uuid

import pytest
from races import at_once, reruns, row_locked
from scim_client import ERROR, GROUP, USER
from sqlalchemy import text
from support import SCOPES


def _conflict(r) -> None:
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["schemas"] == [ERROR] and body["scimType"] == "uniqueness", body


def test_two_creates_of_one_user_name_are_a_201_and_a_409(engine, scim):
    name = f"race-{uuid.uuid4().hex[:10]}@example.com"
    first, second = at_once(engine, "users", *[lambda: scim.call("POST", "/Users", {"schemas": [USER],
                                                                                    "userName": name})] * 2)
    statuses = sorted([first.status_code, second.status_code])
    assert statuses == [201, 409], (first.text, second.text)
    _conflict(first if first.status_code == 409 else second)
    assert scim.find("/Users", f'userName eq "{name}"')["totalResults"] == 1


def test_two_creates_of_one_group_name_are_a_201_and_a_409(engine, scim):
    name = f"race-{uuid.uuid4().hex[:10]}"
    first, second = at_once(engine, "scim_groups", *[lambda: scim.call("POST", "/Groups", {"schemas": [GROUP],
                                                                                          "displayName": name})] * 2)
    assert sorted([first.status_code, second.status_code]) == [201, 409], (first.text, second.text)
    _conflict(first if first.status_code == 409 else second)


def test_a_member_added_while_its_user_is_deleted_is_not_left_behind(engine, scim):
    user = scim.user(f"race-{uuid.uuid4().hex[:10]}@example.com")
    group = scim.group(f"race-{uuid.uuid4().hex[:10]}")
    deleted, patched = at_once(
        engine, "scim_group_members",
        lambda: scim.call("DELETE", f"/Users/{user['id']}"),
        lambda: scim.patch(f"/Groups/{group['id']}", {"op": "add", "path": "members", "value": [{"value": user["id"]}]}),
    )
    assert deleted.status_code == 204, deleted.text
    assert patched.status_code < 500, patched.text  # refused (the user is gone) or, serially first, removed
    with engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM scim_group_members WHERE user_id = :u"),
                            {"u": user["id"]}).scalar_one()
    assert left == 0
    assert user["id"] not in [m["value"] for m in scim.call("GET", f"/Groups/{group['id']}").json().get("members", [])]


def test_a_group_patch_and_the_delete_of_a_member_never_deadlock(engine, scim):
    """The PATCH locks the group, then its members' users; the DELETE used to lock the user, then its
    groups. With the group held until both wait on it (the PATCH first), they met in a cycle and
    PostgreSQL aborted one (503). Taking the groups first, the DELETE waits behind the PATCH and
    they end as that serial order: renamed, then the user gone from it (issue 38)."""
    user = scim.user(f"race-{uuid.uuid4().hex[:10]}@example.com")
    group = scim.group(f"race-{uuid.uuid4().hex[:10]}", members=[user["id"]])
    renamed = f"race-{uuid.uuid4().hex[:10]}"
    patched, deleted = at_once(
        engine, row_locked(engine, "scim_groups", group["id"]),
        lambda: scim.patch(f"/Groups/{group['id']}", {"op": "replace", "path": "displayName", "value": renamed}),
        lambda: scim.call("DELETE", f"/Users/{user['id']}"),
    )
    assert patched.status_code == 200, patched.text
    assert deleted.status_code == 204, deleted.text
    after = scim.call("GET", f"/Groups/{group['id']}").json()
    assert after["displayName"] == renamed and not after.get("members"), after


def test_a_member_added_while_its_delete_takes_its_locks_is_removed_by_it(engine, scim):
    """The PATCH comes first and holds the user (FOR SHARE) when the DELETE, which found the user in
    no group, waits for it: once the PATCH commits, the DELETE takes the new group first (its locks
    again) and removes the membership, the PATCH-then-DELETE serial order."""
    user = scim.user(f"race-{uuid.uuid4().hex[:10]}@example.com")
    group = scim.group(f"race-{uuid.uuid4().hex[:10]}")
    patched, deleted = at_once(
        engine, "scim_group_members",
        lambda: scim.patch(f"/Groups/{group['id']}", {"op": "add", "path": "members", "value": [{"value": user["id"]}]}),
        lambda: scim.call("DELETE", f"/Users/{user['id']}"),
    )
    assert patched.status_code == 200, patched.text
    assert deleted.status_code == 204, deleted.text
    assert not scim.call("GET", f"/Groups/{group['id']}").json().get("members")


# A write of a group holding the person, and the group it leaves: (name prefix, members) or None (deleted).
_GROUP_WRITES = {
    "patch": (lambda scim, g, u, other: scim.patch(f"/Groups/{g}", {"op": "replace", "path": "displayName",
                                                                   "value": f"renamed-{g}"}), ("renamed", [])),
    "put": (lambda scim, g, u, other: scim.call("PUT", f"/Groups/{g}", {
        "schemas": [GROUP], "displayName": f"put-{g}", "members": [{"value": u}, {"value": other}]}), ("put", ["other"])),
    "delete": (lambda scim, g, u, other: scim.call("DELETE", f"/Groups/{g}"), None),
}


@pytest.mark.parametrize("write", sorted(_GROUP_WRITES))
def test_an_erasure_and_a_write_of_a_group_of_the_person_wait_in_a_line(stack, engine, http, org, tenants, scim,
                                                                       write):
    """The group write comes first and holds the group when the person's erasure comes to wait for it; then the
    write updates its members' memberships (`regrant`). The erasure takes the person's groups and SCIM user before
    their membership (`lock_personal_data`), so it waits for the write without holding what the write needs next:
    no cycle, no call aborted and run again (taking the membership first, it was one: docs/concurrency.md). Both
    answer as the write-then-erasure serial order: the group written, the person gone from it and from SCIM."""
    tag = uuid.uuid4().hex[:10]
    user, other = (scim.user(f"race-{who}-{tag}@example.com")["id"] for who in ("p", "o"))
    group = scim.group(f"race-{tag}", members=[user])["id"]
    key = tenants.key(org.org_id, org.workspace_id, user, org.plan, list(SCOPES))
    call, left = _GROUP_WRITES[write]
    before = reruns(stack)
    written, erased = at_once(
        engine, row_locked(engine, "scim_groups", group),
        lambda: call(scim, group, user, other),
        lambda: http.delete("/v1/privacy/me", headers={"Authorization": f"Bearer {key}"}),
    )
    assert written.status_code < 300, written.text
    assert erased.status_code == 200, erased.text
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"
    after = scim.call("GET", f"/Groups/{group}")
    got = None if after.status_code == 404 else (
        after.json()["displayName"].split("-")[0],
        ["other" if m["value"] == other else m["value"] for m in after.json().get("members", [])])
    assert got == left, after.text
    assert scim.call("GET", f"/Users/{user}").status_code == 404


def test_a_422_raised_inside_the_operation_is_not_stored(scim):
    """A group naming a user that does not exist is refused inside the operation (it depends on which
    users exist): the Idempotency-Key keeps nothing, its retry runs again (no `Idempotent-Replayed`)."""
    key = f"idem-{uuid.uuid4()}"
    body = {"schemas": [GROUP], "displayName": f"g-{uuid.uuid4().hex[:8]}", "members": [{"value": "usr_nobody"}]}
    first = scim.call("POST", "/Groups", body, **{"Idempotency-Key": key})
    assert first.status_code in (400, 422), first.text
    again = scim.call("POST", "/Groups", body, **{"Idempotency-Key": key})
    assert again.status_code == first.status_code, again.text
    assert "idempotent-replayed" not in again.headers
