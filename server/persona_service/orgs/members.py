"""What provisioning (SCIM) may do to the organization's members, without
touching the orgs tables: add people, keep their profile, suspend, resume,
remove, and set the role and workspaces their groups grant. The owner's
membership is never changed here. Callers broadcast `org:<id>` after the
commit so cached credentials follow at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from persona_service.kernel.api import Work, new_id
from persona_service.orgs.repository import OrgRepository

OWNER = "owner"


@dataclass(frozen=True, slots=True)
class Provisioned:
    user_id: str
    # The person was already a member (created outside SCIM): the IdP now links them.
    linked: bool


class MemberDirectory:
    def __init__(self, work: Work):
        self._repo = work.of(OrgRepository)

    def provision(self, org_id: str, email: str, name: str) -> Provisioned:
        """The organization's member with this email (linked), or a new user made
        a member (role `member`). An e-mail address proves nothing across
        organizations: a user of another organization, or of none, is never
        linked; the new identity then gets an address of its own."""
        self._repo.lock_email(email)
        user_id = self._repo.user_by_email(email)
        if user_id is not None and self._repo.role_of(org_id, user_id) is not None:
            return Provisioned(user_id, True)
        made = new_id("user")
        address = email if user_id is None else f"scim+{made}@invalid"
        self._repo.create_user(id=made, email=address, name=name, is_platform_admin=False)
        self._repo.add_member(org_id, made, "member")
        return Provisioned(made, False)

    def role_of(self, org_id: str, user_id: str) -> str | None:
        return self._repo.role_of(org_id, user_id)

    def update_profile(self, org_id: str, user_id: str, email: str, name: str) -> None:
        """Keep the user record in step with the IdP, unless another organization
        knows the person too (its IdP, or its people, own the record as much)."""
        if self._repo.other_orgs(org_id, user_id):
            return
        self._repo.lock_email(email)
        if self._repo.user_by_email(email) not in (None, user_id):
            return  # another person's address: keep ours rather than steal theirs
        self._repo.update_user(user_id, email=email, name=name)

    def set_active(self, org_id: str, user_id: str, active: bool, now: datetime) -> int:
        """Suspend (revoking the member's API keys; returns how many) or resume."""
        if self._repo.role_of(org_id, user_id) in (None, OWNER):
            return 0
        self._repo.set_suspended(org_id, user_id, None if active else now)
        return 0 if active else self._repo.revoke_keys(org_id, user_id, now)

    def remove(self, org_id: str, user_id: str, now: datetime) -> None:
        if self._repo.role_of(org_id, user_id) == OWNER:
            return
        self._repo.revoke_keys(org_id, user_id, now)
        self._repo.remove_member(org_id, user_id)

    def grant(self, org_id: str, user_id: str, role: str, workspace_ids: list[str] | None) -> None:
        """The role and workspaces the member's groups grant (never the owner's)."""
        if self._repo.role_of(org_id, user_id) in (None, OWNER):
            return
        self._repo.set_access(org_id, user_id, role, workspace_ids)

    def workspace(self, org_id: str, ref: str) -> str | None:
        """A workspace of the organization by id or slug."""
        return self._repo.workspace_by_ref(org_id, ref)
