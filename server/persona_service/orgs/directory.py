"""What other modules may read and change of organizations (billing sets
the plan its subscription pays for). They never touch the orgs tables."""

from __future__ import annotations

from persona_service.kernel.api import Work
from persona_service.orgs.records import OrganizationRecord
from persona_service.orgs.repository import OrgRepository


class OrgDirectory:
    def __init__(self, work: Work):
        self._repo = work.of(OrgRepository)

    def get(self, org_id: str) -> OrganizationRecord | None:
        return self._repo.get(org_id)

    def primary_workspace(self, org_id: str) -> str:
        """The organization's first workspace: where organization-wide events (billing) are delivered."""
        return self._repo.primary_workspace(org_id) or ""

    def set_plan(self, org_id: str, plan: str) -> None:
        """The plan every credential of the organization acts under (limits, features)."""
        self._repo.set_plan(org_id, plan)

    def linked_later(self, org_id: str, user_id: str) -> list[str]:
        """The other organizations that came to know this organization's user
        after it did. Identities are per organization, so these can only be
        links by e-mail that SCIM provisioning made before it stopped linking
        across organizations; the person's erasure ends them too."""
        return self._repo.joined_after(org_id, user_id)

    def end_members(self, org_ids: list[str], user_id: str) -> set[str]:
        """Lock the user's memberships of `org_ids` (FOR UPDATE, in org id order) before their erasure ends them:
        a second erasure, or a write holding one (every write holds its caller's first:
        kernel.transport.stages.hold, through OrgCredentialStore.hold_member), waits for it; those that still exist."""
        return self._repo.lock_members(sorted(org_ids), user_id, exclusive=True)
