"""Who reads which events and audit rows (mirrors kernel/transport/access.py
`log_workspace`): a principal confined to one workspace (an API key, or the
session of a member whose SCIM groups name workspaces) sees that workspace's
rows and the organization's rows that concern no workspace, as it sees only
that workspace's personas; an organization-wide session sees every row."""

from __future__ import annotations

import uuid

import pytest
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.audit import AuditEntry, AuditLog
from persona_service.orgs.repository import OrgRepository
from support import assert_envelope


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def org(http, engine, tenants, jwt_minter):
    """Two workspaces of one organization, each with a persona (events and audit rows of its own),
    one audit row of no workspace, and the readers."""
    home = tenants(plan="pro")
    away = tenants.workspace(home)
    personas = {}
    for who in (home, away):
        r = http.post("/v1/personas", json={"intent": f"A clockmaker of {who.workspace_id}"}, headers=who.auth)
        assert r.status_code == 200, r.text
        personas[who.workspace_id] = r.json()["id"]
    renewal = f"req-{uuid.uuid4().hex}"
    confined_user = f"usr_{uuid.uuid4().hex[:20]}"
    with engine.begin() as conn:
        AuditLog(Work.on(conn)).record(AuditEntry(action="subscription.renew", outcome="success", status=200,
                                         request_id=renewal, client_ip=None, org_id=home.org_id))
        repo = OrgRepository(conn)
        repo.create_user(id=confined_user, email=f"{confined_user}@example.invalid", name="Confined",
                         is_platform_admin=False)
        repo.add_member(home.org_id, confined_user, "admin")
        repo.set_access(home.org_id, confined_user, "admin", [home.workspace_id])
    readers = {
        "key": home.auth,
        "confined session": bearer(jwt_minter.mint_session(confined_user, home.org_id, home.workspace_id)),
        "org-wide session": bearer(jwt_minter.mint_session(home.user_id, home.org_id, home.workspace_id)),
    }
    return home, away, personas, renewal, readers


def _listed(http, path, headers):
    r = http.get(path, params={"limit": 100}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json().get("items", [])


@pytest.mark.parametrize("reader", ["key", "confined session"])
def test_a_confined_principal_sees_its_workspace_and_the_organizations_rows(http, org, reader):
    home, away, personas, renewal, readers = org
    headers = readers[reader]
    events = _listed(http, "/v1/events", headers)
    assert {e["workspaceId"] for e in events} == {home.workspace_id}
    assert personas[home.workspace_id] in {e["data"].get("personaId") for e in events}
    theirs = http.get("/v1/events", params={"personaId": personas[away.workspace_id]}, headers=headers)
    assert theirs.status_code == 200 and theirs.json().get("items", []) == []
    audit = _listed(http, "/v1/audit/events", headers)
    assert {a.get("workspaceId", "") for a in audit} == {home.workspace_id, ""}
    assert renewal in {a["requestId"] for a in audit}  # the organization's own row, of no workspace
    # One of the other workspace's events, by id, is one that does not exist.
    everything = _listed(http, "/v1/events", readers["org-wide session"])
    away_id = next(e["id"] for e in everything if e["workspaceId"] == away.workspace_id)
    assert_envelope(http.get(f"/v1/events/{away_id}", headers=headers), 404, "not_found")
    # As the other workspace's persona is.
    assert_envelope(http.get(f"/v1/personas/{personas[away.workspace_id]}", headers=headers), 404, "not_found")


def test_an_organization_wide_session_sees_every_workspace(http, org):
    home, away, personas, renewal, readers = org
    headers = readers["org-wide session"]
    events = _listed(http, "/v1/events", headers)
    assert {e["workspaceId"] for e in events} == {home.workspace_id, away.workspace_id}
    away_id = next(e["id"] for e in events if e["workspaceId"] == away.workspace_id)
    assert http.get(f"/v1/events/{away_id}", headers=headers).status_code == 200
    audit = _listed(http, "/v1/audit/events", headers)
    assert {a.get("workspaceId", "") for a in audit} == {home.workspace_id, away.workspace_id, ""}
