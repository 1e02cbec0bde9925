"""Right to erasure through Envoy: a member's erasure soft-deletes the
personas they created (30-day grace), revokes their keys at once, ends
their membership, deletes their chat sessions and exports, anonymizes
them, keeps the audit log; the organization's owner is refused."""

from __future__ import annotations

import uuid

import pytest
from persona_service.kernel.api import hash_secret
from persona_service.orgs.repository import OrgRepository
from persona_service.scim.records import UserFields
from persona_service.scim.repository import UserRepository
from sqlalchemy import text
from support import SCOPES, Tenant


@pytest.fixture
def member(engine, tenants, tenant) -> Tenant:
    """A second user of `tenant`'s organization, with a key of their own."""
    user_id = "usr_" + uuid.uuid4().hex[:20]
    with engine.begin() as conn:
        repo = OrgRepository(conn)
        repo.create_user(id=user_id, email=f"{user_id}@example.com", name="Erin Member")
        repo.add_member(tenant.org_id, user_id, "member")
    key = tenants.key(tenant.org_id, tenant.workspace_id, user_id, tenant.plan, list(SCOPES))
    return Tenant(tenant.org_id, tenant.workspace_id, user_id, key, tenant.plan)


def test_a_members_erasure(http, engine, tenant, member):
    persona = http.post("/v1/personas", json={"intent": "A patient gardener who names every snail"},
                        headers=member.auth).json()
    session = http.post("/v1/chat/sessions", json={"personaId": persona["id"]}, headers=member.auth).json()
    assert http.post("/v1/privacy/exports", json={}, headers=member.auth).status_code == 200

    r = http.delete("/v1/privacy/me", headers=member.auth)
    assert r.status_code == 200, r.text
    assert r.json()["counts"] == {"api_keys_revoked": 1, "memberships_ended": 1, "users_anonymized": 1,
                                  "personas_scheduled": 1, "chat_sessions_deleted": 1,
                                  "privacy_exports_deleted": 1}
    assert http.get("/v1/personas", headers=member.auth).status_code == 401  # at once

    kept = http.get(f"/v1/personas/{persona['id']}", headers=tenant.auth).json()
    assert kept["state"] == "deleted" and kept["purgeAt"]  # the grace rules: restorable for 30 days
    assert http.get(f"/v1/chat/sessions/{session['sessionId']}", headers=tenant.auth).status_code == 404
    with engine.connect() as conn:
        user = conn.execute(text("SELECT email, name FROM users WHERE id = :u"), {"u": member.user_id}).one()
        audited = conn.execute(text("SELECT count(*) FROM audit_events WHERE actor_user_id = :u"),
                               {"u": member.user_id}).scalar()
    assert user.email == f"erased+{member.user_id}@invalid" and user.name == ""
    assert audited > 0  # kept: the audit log names the user only by id


def test_an_erasure_takes_the_personas_a_member_imported(http, tenant, member):
    card = {"spec": "chara_card_v2", "spec_version": "2.0",
            "data": {"name": "Ada Import", "description": "A careful engineer who reads every log"}}
    imported = http.post("/v1/personas/import", json=card, headers=member.auth)
    assert imported.status_code == 200, imported.text
    export = http.post("/v1/privacy/exports", json={}, headers=member.auth)
    assert export.status_code == 200, export.text

    r = http.delete("/v1/privacy/me", headers=member.auth)
    assert r.status_code == 200, r.text
    assert r.json()["counts"]["personas_scheduled"] == 1  # 0 when only `persona.create` counted
    kept = http.get(f"/v1/personas/{imported.json()['id']}", headers=tenant.auth).json()
    assert kept["state"] == "deleted" and kept["purgeAt"]


def test_an_erasure_takes_the_forks_a_member_made(http, tenant, member):
    parent = http.post("/v1/personas", json={"intent": "A lighthouse keeper who logs every gull"},
                       headers=tenant.auth).json()
    fork = http.post(f"/v1/personas/{parent['id']}/fork", json={"note": "the member's"}, headers=member.auth)
    assert fork.status_code == 200, fork.text

    r = http.delete("/v1/privacy/me", headers=member.auth)
    assert r.status_code == 200, r.text
    assert r.json()["counts"]["personas_scheduled"] == 1  # the fork's audit entry names the parent: 0 without createdId
    assert http.get(f"/v1/personas/{fork.json()['id']}", headers=tenant.auth).json()["state"] == "deleted"
    assert http.get(f"/v1/personas/{parent['id']}", headers=tenant.auth).json()["state"] == "active"  # the owner's


def test_an_erasure_deletes_the_completions_sessions_of_the_members_credentials(http, engine, tenant, member,
                                                                              jwt_minter):
    """A completion without `user` is stored in its credential's completions session (`openai:<credential id>`):
    what the member sent through their key or their session JWT is theirs, and goes with them. One naming an end
    user (`user`) is that user's, and stays; so does the owner's."""
    persona = http.post("/v1/personas", json={"intent": "A night-shift baker who hums sea shanties"},
                        headers=member.auth).json()
    jwt = {"Authorization": "Bearer " + jwt_minter.mint_session(member.user_id, tenant.org_id, tenant.workspace_id)}

    def complete(auth: dict[str, str], user: str = "") -> None:
        body = {"model": f"persona://{persona['id']}", "messages": [{"role": "user", "content": "Any bread left?"}]}
        made = http.post("/v1/chat/completions", json={**body, **({"user": user} if user else {})}, headers=auth)
        assert made.status_code == 200, made.text

    for auth, user in ((member.auth, ""), (jwt, ""), (member.auth, "customer-7"), (tenant.auth, "")):
        complete(auth, user)

    def sessions() -> list[str]:
        with engine.connect() as conn:
            return sorted(conn.execute(text("SELECT user_id FROM chat_sessions WHERE persona_id = :p"),
                                       {"p": persona["id"]}).scalars())
    made = sessions()
    assert len(made) == 4 and "customer-7" in made

    r = http.delete("/v1/privacy/me", headers=member.auth)
    assert r.status_code == 200, r.text
    assert r.json()["counts"]["chat_sessions_deleted"] == 2  # the key's and the JWT's
    with engine.connect() as conn:
        owners = conn.execute(text("SELECT id FROM api_keys WHERE secret_hash = :h"),
                              {"h": hash_secret(tenant.api_key)}).scalar_one()
    assert sessions() == sorted(["customer-7", f"openai:{owners}"])


def test_the_owner_cannot_erase_themselves(http, tenant):
    r = http.delete("/v1/privacy/me", headers=tenant.auth)
    assert r.status_code == 409 and r.json()["error"]["details"]["conflictField"] == "owner"
    assert http.get("/v1/personas", headers=tenant.auth).status_code == 200


def test_erasure_ends_the_links_other_organizations_made_to_the_person(http, engine, tenants, member):
    # Audit #28: before SCIM stopped linking across organizations, another organization's IdP could
    # link this member by e-mail; that link must not keep the person's record alive.
    other = tenants()
    email = f"{member.user_id}@example.com"
    with engine.begin() as conn:
        OrgRepository(conn).add_member(other.org_id, member.user_id, "member")
        UserRepository(conn).insert(other.org_id, member.user_id, UserFields(
            user_name=email, external_id=None, display_name="Linked", active=True, document={"userName": email}))

    r = http.delete("/v1/privacy/me", headers=member.auth)
    assert r.status_code == 200, r.text
    counts = r.json()["counts"]
    assert counts["users_anonymized"] == 1 and counts["memberships_ended"] == 2, counts
    assert counts["scim_users_deleted"] == 1
    with engine.connect() as conn:
        user = conn.execute(text("SELECT email, name FROM users WHERE id = :u"), {"u": member.user_id}).one()
        left = conn.execute(text("SELECT count(*) FROM memberships WHERE user_id = :u"), {"u": member.user_id})
        scim = conn.execute(text("SELECT count(*) FROM scim_users WHERE id = :u"), {"u": member.user_id})
        assert (left.scalar(), scim.scalar()) == (0, 0)
    assert user.email == f"erased+{member.user_id}@invalid" and user.name == ""
