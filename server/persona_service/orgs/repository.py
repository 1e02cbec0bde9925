from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, any_, bindparam, delete, func, insert, or_, select, update

from persona_service.kernel.api import (
    Batches,
    MemberCredential,
    Prepared,
    declare_named_lock,
    export_batches,
    once_per,
    record_or_none,
    table_of,
)
from persona_service.orgs.records import HeldMembership, OrganizationRecord
from persona_service.orgs.tables import ApiKey, Membership, Organization, User, Workspace

_orgs = table_of(Organization)
# An e-mail address's owner is decided under a lock by name on it (`lock_email`). SCIM decides by it which user a
# new SCIM user is (then inserts it and revokes a deactivated member's keys) and a PUT takes it after the user's
# row: it comes right after the SCIM roots in the lock order, not last (docs/concurrency.md).
EMAIL_SCOPE = "user email"
declare_named_lock(EMAIL_SCOPE)
_workspaces = table_of(Workspace)
_users = table_of(User)
_members = table_of(Membership)
_keys = table_of(ApiKey)

# The caller's membership held FOR SHARE, first in every write (kernel.transport.stages.hold): prepared once,
# run without SQLAlchemy's per-execution layers (kernel.data.prepared; issue 50: 12% of a chat reply's GIL time).
_hold_member = Prepared(select(_members.c.org_id).where(
    _members.c.org_id == bindparam("org"), _members.c.user_id == bindparam("user")).with_for_update(read=True),
    HeldMembership)

_workspaces_count = (
    select(func.count()).select_from(_workspaces).where(_workspaces.c.org_id == _orgs.c.id).scalar_subquery()
)


class OrgRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def get(self, org_id: str) -> OrganizationRecord | None:
        stmt = select(_orgs, _workspaces_count.label("workspaces_count")).where(_orgs.c.id == org_id)
        return record_or_none(OrganizationRecord, self._conn.execute(stmt).mappings().first())

    def primary_workspace(self, org_id: str) -> str | None:
        stmt = (select(_workspaces.c.id).where(_workspaces.c.org_id == org_id)
                .order_by(_workspaces.c.created_at, _workspaces.c.id).limit(1))
        return self._conn.execute(stmt).scalar()

    def set_plan(self, org_id: str, plan: str) -> None:
        self._conn.execute(update(_orgs).where(_orgs.c.id == org_id).values(plan=plan))

    def slug_taken(self, slug: str) -> bool:
        return self._conn.execute(select(_orgs.c.id).where(_orgs.c.slug == slug)).first() is not None

    def create_org(self, *, id: str, slug: str, name: str, region: str, data_residency_locked: bool, plan: str,
                   owner_user_id: str) -> None:
        self._conn.execute(insert(_orgs).values(id=id, slug=slug, name=name, region=region, plan=plan,
                                               data_residency_locked=data_residency_locked, owner_user_id=owner_user_id))

    def create_workspace(self, *, id: str, org_id: str, slug: str, name: str) -> None:
        self._conn.execute(insert(_workspaces).values(id=id, org_id=org_id, slug=slug, name=name))

    def create_user(self, *, id: str, email: str, name: str, is_platform_admin: bool = False) -> None:
        self._conn.execute(insert(_users).values(id=id, email=email, name=name, is_platform_admin=is_platform_admin))

    def add_member(self, org_id: str, user_id: str, role: str) -> None:
        self._conn.execute(insert(_members).values(org_id=org_id, user_id=user_id, role=role))

    def hold_member(self, org_id: str, user_id: str) -> bool:
        """`lock_members([org_id], user_id, exclusive=False)` for one organization: whether it exists."""
        return _hold_member.first(self._conn, {"org": org_id, "user": user_id}) is not None

    def lock_members(self, org_ids: list[str], user_id: str, *, exclusive: bool) -> set[str]:
        """Lock the user's memberships of `org_ids` (in org id order) until the unit of work ends: FOR UPDATE,
        or FOR SHARE unless `exclusive`; the organizations of those that exist."""
        stmt = (select(_members.c.org_id).where(_members.c.org_id.in_(org_ids), _members.c.user_id == user_id)
                .order_by(_members.c.org_id).with_for_update(read=not exclusive))
        return set(self._conn.execute(stmt).scalars())

    def member(self, org_id: str, user_id: str, workspace_id: str) -> MemberCredential | None:
        """The user's membership in the org (with the user's admin flag and
        the org's plan) if the workspace is the org's; else None."""
        stmt = (
            select(_members.c.role, _members.c.workspace_ids, _users.c.is_platform_admin, _orgs.c.plan)
            .join(_users, _users.c.id == _members.c.user_id)
            .join(_orgs, _orgs.c.id == _members.c.org_id)
            .join(_workspaces, (_workspaces.c.org_id == _orgs.c.id) & (_workspaces.c.id == workspace_id))
            .where(_members.c.org_id == org_id, _members.c.user_id == user_id, _members.c.suspended_at.is_(None),
                   _members.c.workspace_ids.is_(None) | (_workspaces.c.id == any_(_members.c.workspace_ids)))
        )
        row = self._conn.execute(stmt).first()
        if row is None:
            return None
        return MemberCredential(role=row.role, plan=row.plan, is_platform_admin=row.is_platform_admin,
                                all_workspaces=row.workspace_ids is None)

    # --- provisioning (SCIM, through orgs.members.MemberDirectory) ---------------

    def lock_email(self, email: str) -> None:
        """Hold an e-mail address (as its unique index compares it) until the transaction ends: who owns it is
        decided by one writer at a time, so two people given one new address at once answer as one after the
        other (the second keeps its own), not with the index's conflict."""
        once_per(self._conn, EMAIL_SCOPE, email.lower())

    def user_by_email(self, email: str) -> str | None:
        return self._conn.execute(select(_users.c.id).where(func.lower(_users.c.email) == email.lower())).scalar()

    def role_of(self, org_id: str, user_id: str) -> str | None:
        stmt = select(_members.c.role).where(_members.c.org_id == org_id, _members.c.user_id == user_id)
        return self._conn.execute(stmt).scalar()

    def other_orgs(self, org_id: str, user_id: str) -> int:
        stmt = select(func.count()).select_from(_members).where(_members.c.user_id == user_id,
                                                                _members.c.org_id != org_id)
        return self._conn.execute(stmt).scalar_one()

    def joined_after(self, org_id: str, user_id: str) -> list[str]:
        """The other organizations the user became a member of after this one."""
        joined = select(_members.c.created_at).where(_members.c.org_id == org_id,
                                                     _members.c.user_id == user_id).scalar_subquery()
        stmt = (select(_members.c.org_id).where(_members.c.user_id == user_id, _members.c.org_id != org_id,
                                                _members.c.created_at > joined).order_by(_members.c.created_at))
        return list(self._conn.execute(stmt).scalars())

    def update_user(self, user_id: str, *, email: str, name: str) -> None:
        self._conn.execute(update(_users).where(_users.c.id == user_id).values(email=email, name=name))

    def set_suspended(self, org_id: str, user_id: str, since: datetime | None) -> None:
        """Suspend the member (`since`) or resume them (None)."""
        self._update_member(org_id, user_id, suspended_at=since)

    def set_access(self, org_id: str, user_id: str, role: str, workspace_ids: list[str] | None) -> None:
        """The member's role and workspaces (None: every workspace of the organization)."""
        self._update_member(org_id, user_id, role=role, workspace_ids=workspace_ids)

    def _update_member(self, org_id: str, user_id: str, **columns: str | datetime | list[str] | None) -> None:
        self._conn.execute(update(_members).where(_members.c.org_id == org_id, _members.c.user_id == user_id)
                          .values(**columns))

    def revoke_keys(self, org_id: str, user_id: str, now: datetime) -> int:
        return self._conn.execute(update(_keys).where(
            _keys.c.org_id == org_id, _keys.c.created_by_user_id == user_id, _keys.c.revoked_at.is_(None),
        ).values(revoked_at=now)).rowcount

    def remove_member(self, org_id: str, user_id: str) -> int:
        return self._conn.execute(delete(_members).where(
            _members.c.org_id == org_id, _members.c.user_id == user_id)).rowcount

    def workspace_by_ref(self, org_id: str, ref: str) -> str | None:
        """A workspace of the org by id or slug."""
        stmt = select(_workspaces.c.id).where(_workspaces.c.org_id == org_id,
                                              or_(_workspaces.c.id == ref, _workspaces.c.slug == ref))
        return self._conn.execute(stmt).scalar()

    def personal_data(self, org_id: str, user_id: str) -> dict[str, Batches]:
        """The user, their membership of the organization, and the API keys they created (never the hashes)."""
        queries = {
            "users": select(_users).where(_users.c.id == user_id),
            "memberships": select(_members).where(_members.c.org_id == org_id, _members.c.user_id == user_id),
            "api_keys": select(_keys).where(_keys.c.org_id == org_id, _keys.c.created_by_user_id == user_id),
        }
        return {name: export_batches(self._conn, stmt, omit=("secret_hash",)) for name, stmt in queries.items()}

    def erase_member(self, org_id: str, user_id: str, now: datetime) -> dict[str, int]:
        """Revoke the user's keys in the organization, end the membership, and
        anonymize the user once no organization knows them any more."""
        revoked = self.revoke_keys(org_id, user_id, now)
        left = self.remove_member(org_id, user_id)
        remaining = self._conn.execute(select(func.count()).select_from(_members).where(
            _members.c.user_id == user_id)).scalar_one()
        anonymized = 0
        if not remaining:
            anonymized = self._conn.execute(update(_users).where(_users.c.id == user_id).values(
                email=f"erased+{user_id}@invalid", name="")).rowcount
        return {"api_keys_revoked": revoked, "memberships_ended": left, "users_anonymized": anonymized}
