"""What SCIM does to the organization through Envoy: provisioned users are
members; deactivation stops their sessions and keys at once; mapped groups
grant roles and workspaces; tokens are confined to SCIM; everything audited."""

from __future__ import annotations

import uuid

import pytest
from persona_service.orgs.repository import OrgRepository
from scim_client import USER, Scim
from sqlalchemy import text
from support import SCOPES


def _name() -> str:
    return f"prov-{uuid.uuid4().hex[:10]}@example.com"


def _role(engine, org_id, user_id):
    with engine.connect() as conn:
        return conn.execute(text("SELECT role, workspace_ids, suspended_at IS NOT NULL AS suspended FROM memberships "
                                 "WHERE org_id = :o AND user_id = :u"), {"o": org_id, "u": user_id}).first()


def test_deactivation_stops_sessions_and_keys_at_once(http, engine, scim, org, tenants, jwt_minter):
    user = scim.user(_name())
    assert _role(engine, org.org_id, user["id"]).role == "member"
    session = {"Authorization": "Bearer " + jwt_minter.mint_session(user["id"], org.org_id, org.workspace_id)}
    key = {"Authorization": "Bearer " + tenants.key(org.org_id, org.workspace_id, user["id"], org.plan,
                                                    [s for s in SCOPES if s != "config:write"])}
    assert http.get("/v1/personas", headers=session).status_code == 200
    assert http.get("/v1/personas", headers=key).status_code == 200

    assert scim.patch(f"/Users/{user['id']}", {"op": "Replace", "path": "active", "value": "False"}).status_code == 200
    assert http.get("/v1/personas", headers=session).status_code == 401
    assert http.get("/v1/personas", headers=key).status_code == 401
    assert _role(engine, org.org_id, user["id"]).suspended

    assert scim.patch(f"/Users/{user['id']}", {"op": "replace", "path": "active", "value": True}).status_code == 200
    assert http.get("/v1/personas", headers=session).status_code == 200  # the membership is back
    assert http.get("/v1/personas", headers=key).status_code == 401  # revoked keys stay revoked


def test_delete_ends_the_membership(http, engine, scim, org, jwt_minter):
    user = scim.user(_name())
    session = {"Authorization": "Bearer " + jwt_minter.mint_session(user["id"], org.org_id, org.workspace_id)}
    group = scim.group(f"g-{uuid.uuid4().hex[:8]}", [user["id"]])
    assert scim.call("DELETE", f"/Users/{user['id']}").status_code == 204
    assert _role(engine, org.org_id, user["id"]) is None
    assert http.get("/v1/personas", headers=session).status_code == 401
    assert "members" not in scim.call("GET", f"/Groups/{group['id']}").json()


def test_mapped_groups_grant_roles_and_workspaces(http, engine, scim, org, jwt_minter):
    other_ws = "ws_" + uuid.uuid4().hex[:20]
    slug = f"research-{uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        OrgRepository(conn).create_workspace(id=other_ws, org_id=org.org_id, slug=slug, name="Research")
    user = scim.user(_name())

    def session(ws):
        return {"Authorization": "Bearer " + jwt_minter.mint_session(user["id"], org.org_id, ws)}

    admins = scim.group(f"persona:*:admin-{uuid.uuid4().hex[:4]}".rsplit("-", 1)[0], [user["id"]])
    assert _role(engine, org.org_id, user["id"]).role == "admin"
    assert http.get("/v1/keys", headers=session(org.workspace_id)).status_code == 200  # an admin's

    assert scim.call("DELETE", f"/Groups/{admins['id']}").status_code == 204
    assert _role(engine, org.org_id, user["id"]).role == "member"
    assert http.get("/v1/keys", headers=session(org.workspace_id)).status_code == 403

    research = scim.group(f"persona:{slug}:member", [user["id"]])
    row = _role(engine, org.org_id, user["id"])
    assert row.role == "member" and row.workspace_ids == [other_ws]
    assert http.get("/v1/personas", headers=session(other_ws)).status_code == 200
    assert http.get("/v1/personas", headers=session(org.workspace_id)).status_code == 401

    scim.patch(f"/Groups/{research['id']}", {"op": "Remove", "path": "members", "value": [{"value": user["id"]}]})
    assert _role(engine, org.org_id, user["id"]).workspace_ids is None
    assert http.get("/v1/personas", headers=session(org.workspace_id)).status_code == 200


def test_mapped_group_names_are_checked(scim):
    for bad in ("persona:*:owner", "persona:no-such-workspace:member"):
        r = scim.call("POST", "/Groups", {"displayName": bad})
        assert r.status_code == 422 and r.json()["scimType"] == "invalidValue", bad
    r = scim.call("POST", "/Groups", {"displayName": f"g-{uuid.uuid4().hex[:6]}", "members": [{"value": "usr_x"}]})
    assert r.status_code == 422 and r.json()["error"]["details"]["violations"][0]["value"] == "usr_x"


def test_the_owner_is_linked_but_never_deactivated_or_deleted(engine, scim, org):
    with engine.connect() as conn:
        email = conn.execute(text("SELECT email FROM users WHERE id = :u"), {"u": org.user_id}).scalar()
    owner = scim.user(email)
    assert owner["id"] == org.user_id  # linked, not duplicated
    r = scim.patch(f"/Users/{owner['id']}", {"op": "replace", "path": "active", "value": False})
    assert r.status_code == 400 and r.json()["scimType"] == "mutability"
    assert scim.call("DELETE", f"/Users/{owner['id']}").json()["scimType"] == "mutability"
    assert _role(engine, org.org_id, org.user_id).role == "owner"


def test_tokens_are_confined_to_scim_and_revocable(http, org, tenants):
    made = http.post("/v1/auth/scim/tokens", json={"name": "Entra"}, headers=org.auth).json()
    token = {"Authorization": f"Bearer {made['secret']}"}
    assert made["secret"].startswith("scim_") and made["token"]["prefix"] == made["secret"][:12]
    assert http.get("/v1/auth/scim/v2/Users", headers=token).status_code == 200
    for path in ("/v1/personas", f"/v1/orgs/{org.org_id}", "/v1/keys"):
        assert http.get(path, headers=token).status_code == 403, path
    listed = http.get("/v1/auth/scim/tokens", headers=org.auth).json()["items"]
    assert made["token"]["id"] in [t["id"] for t in listed]
    assert made["token"]["id"] not in [k["id"] for k in http.get("/v1/keys", headers=org.auth).json()["items"]]
    revoked = http.post(f"/v1/auth/scim/tokens/{made['token']['id']}/revoke", json={}, headers=org.auth)
    assert revoked.status_code == 200 and revoked.json()["revokedAt"]
    r = http.get("/v1/auth/scim/v2/Users", headers=token)
    assert r.status_code == 401 and r.json()["schemas"] == ["urn:ietf:params:scim:api:messages:2.0:Error"]


def test_who_may_provision(http, org, tenants):
    # An Owner's key with config:write may; a key without it may not; nor another org's token.
    assert http.get("/v1/auth/scim/v2/Users", headers=org.auth).status_code == 200
    reader = tenants.tenant_key(org, ["personas:read", "config:read"])
    r = http.get("/v1/auth/scim/v2/Users", headers={"Authorization": f"Bearer {reader}"})
    assert r.status_code == 403 and r.json()["status"] == "403"


def test_tenants_never_see_each_other(http, scim, tenants):
    mine = scim.user(_name())
    other = tenants()
    secret = http.post("/v1/auth/scim/tokens", json={"name": "Okta"}, headers=other.auth).json()["secret"]
    theirs = Scim(http, secret)
    assert theirs.call("GET", f"/Users/{mine['id']}").status_code == 404
    assert theirs.find("/Users", f'userName eq "{mine["userName"]}"')["totalResults"] == 0
    assert theirs.call("DELETE", f"/Users/{mine['id']}").status_code == 404


def test_everything_scim_changes_is_audited(http, scim, org):
    user = scim.user(_name())
    scim.call("PUT", f"/Users/{user['id']}", {"schemas": [USER], "userName": user["userName"], "active": False})
    r = http.get("/v1/audit/events", params={"resourceType": "scim_user", "limit": 100}, headers=org.auth)
    assert r.status_code == 200, r.text
    actions = {e["action"] for e in r.json()["items"]}
    assert any("create" in a for a in actions) and any("replace" in a for a in actions)


@pytest.mark.parametrize("media", ["application/scim+json", "application/scim+json; charset=utf-8"])
def test_answers_are_scim_json(scim, media):
    r = scim.call("POST", "/Users", {"schemas": [USER], "userName": _name()}, **{"Content-Type": media})
    assert r.status_code == 201 and r.headers["content-type"] == "application/scim+json"


def test_erasure_takes_the_scim_record_too(http, engine, scim, org, tenants):
    user = scim.user(_name(), displayName="Erin Erased")
    group = scim.group(f"g-{uuid.uuid4().hex[:8]}", [user["id"]])
    key = tenants.key(org.org_id, org.workspace_id, user["id"], org.plan, ["personas:read"])
    r = http.delete("/v1/privacy/me", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and r.json()["counts"]["scim_users_deleted"] == 1
    assert scim.call("GET", f"/Users/{user['id']}").status_code == 404
    assert "members" not in scim.call("GET", f"/Groups/{group['id']}").json()


def _user_row(engine, user_id):
    with engine.connect() as conn:
        user = conn.execute(text("SELECT email, name FROM users WHERE id = :u"), {"u": user_id}).one()
        orgs = conn.execute(text("SELECT org_id FROM memberships WHERE user_id = :u"), {"u": user_id}).scalars()
        return user, sorted(orgs)


def test_an_email_never_links_a_user_of_another_organization(http, engine, scim, org, tenants):
    # Audit #28: organization A named B's people by e-mail and got (and could act on) B's users.
    b = tenants()
    b_scim = Scim(http, http.post("/v1/auth/scim/tokens", json={"name": "Okta"}, headers=b.auth).json()["secret"])
    email = _name()
    theirs = b_scim.user(email, displayName="Bea of B")
    owner_email = _user_row(engine, b.user_id)[0].email
    for name in (email, owner_email.upper()):  # B's member, and B's owner
        mine = scim.user(name, displayName="A's copy", emails=[{"value": name, "primary": True}])
        assert mine["id"] not in (theirs["id"], b.user_id)
        assert _role(engine, org.org_id, mine["id"]).role == "member"
        scim.patch(f"/Users/{mine['id']}", {"op": "replace", "path": "displayName", "value": "Renamed by A"})
    assert _user_row(engine, theirs["id"]) == ((email, "Bea of B"), [b.org_id])  # untouched
    assert _user_row(engine, b.user_id)[1] == [b.org_id]

    key = tenants.key(b.org_id, b.workspace_id, theirs["id"], b.plan, ["personas:read"])
    r = http.delete("/v1/privacy/me", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and r.json()["counts"]["users_anonymized"] == 1, r.text
    assert _user_row(engine, theirs["id"])[0] == (f"erased+{theirs['id']}@invalid", "")
