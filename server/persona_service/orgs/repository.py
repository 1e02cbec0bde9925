from __future__ import annotations

from sqlalchemy import Connection, delete, func, insert, select, update

from persona_service.kernel.auth import MemberCredential
from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.records import record_or_none
from persona_service.kernel.personal_data import export_records
from persona_service.orgs.records import OrganizationRecord
from persona_service.orgs.tables import ApiKey, Membership, Organization, User, Workspace

_orgs = table_of(Organization)
_workspaces = table_of(Workspace)
_users = table_of(User)
_members = table_of(Membership)
_keys = table_of(ApiKey)

_workspaces_count = (
    select(func.count()).select_from(_workspaces).where(_workspaces.c.org_id == _orgs.c.id).scalar_subquery()
)


class OrgRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def get(self, org_id: str) -> OrganizationRecord | None:
        stmt = select(_orgs, _workspaces_count.label("workspaces_count")).where(_orgs.c.id == org_id)
        return record_or_none(OrganizationRecord, self.conn.execute(stmt).mappings().first())

    def primary_workspace(self, org_id: str) -> str | None:
        stmt = (select(_workspaces.c.id).where(_workspaces.c.org_id == org_id)
                .order_by(_workspaces.c.created_at, _workspaces.c.id).limit(1))
        return self.conn.execute(stmt).scalar()

    def set_plan(self, org_id: str, plan: str) -> None:
        self.conn.execute(update(_orgs).where(_orgs.c.id == org_id).values(plan=plan))

    def slug_taken(self, slug: str) -> bool:
        return self.conn.execute(select(_orgs.c.id).where(_orgs.c.slug == slug)).first() is not None

    def create_org(self, **values) -> None:
        self.conn.execute(insert(_orgs).values(**values))

    def create_workspace(self, **values) -> None:
        self.conn.execute(insert(_workspaces).values(**values))

    def create_user(self, **values) -> None:
        self.conn.execute(insert(_users).values(**values))

    def add_member(self, org_id: str, user_id: str, role: str) -> None:
        self.conn.execute(insert(_members).values(org_id=org_id, user_id=user_id, role=role))

    def member(self, org_id: str, user_id: str, workspace_id: str) -> MemberCredential | None:
        """The user's membership in the org (with the user's admin flag and
        the org's plan) if the workspace is the org's; else None."""
        stmt = (
            select(_members.c.role, _users.c.is_platform_admin, _orgs.c.plan)
            .join(_users, _users.c.id == _members.c.user_id)
            .join(_orgs, _orgs.c.id == _members.c.org_id)
            .join(_workspaces, (_workspaces.c.org_id == _orgs.c.id) & (_workspaces.c.id == workspace_id))
            .where(_members.c.org_id == org_id, _members.c.user_id == user_id)
        )
        row = self.conn.execute(stmt).first()
        if row is None:
            return None
        return MemberCredential(role=row.role, plan=row.plan, is_platform_admin=row.is_platform_admin)

    def personal_data(self, org_id: str, user_id: str) -> dict[str, list[dict]]:
        """The user, their membership of the organization, and the API keys they created (never the hashes)."""
        queries = {
            "users": select(_users).where(_users.c.id == user_id),
            "memberships": select(_members).where(_members.c.org_id == org_id, _members.c.user_id == user_id),
            "api_keys": select(_keys).where(_keys.c.org_id == org_id, _keys.c.created_by_user_id == user_id),
        }
        return {name: export_records(self.conn.execute(stmt).mappings(), omit=("secret_hash",))
                for name, stmt in queries.items()}

    def erase_member(self, org_id: str, user_id: str, now) -> dict[str, int]:
        """Revoke the user's keys in the organization, end the membership, and
        anonymize the user once no organization knows them any more."""
        revoked = self.conn.execute(update(_keys).where(
            _keys.c.org_id == org_id, _keys.c.created_by_user_id == user_id, _keys.c.revoked_at.is_(None),
        ).values(revoked_at=now)).rowcount
        left = self.conn.execute(delete(_members).where(
            _members.c.org_id == org_id, _members.c.user_id == user_id)).rowcount
        remaining = self.conn.execute(select(func.count()).select_from(_members).where(
            _members.c.user_id == user_id)).scalar_one()
        anonymized = 0
        if not remaining:
            anonymized = self.conn.execute(update(_users).where(_users.c.id == user_id).values(
                email=f"erased+{user_id}@invalid", name="")).rowcount
        return {"api_keys_revoked": revoked, "memberships_ended": left, "users_anonymized": anonymized}
