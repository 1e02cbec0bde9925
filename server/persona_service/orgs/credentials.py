"""The kernel's credential store, implemented on this module's tables:
API keys by secret hash, memberships for session tokens, and the caller's
membership held first in every write (kernel.transport.stages.hold)."""

from __future__ import annotations

from persona_service.kernel.api import KeyCredential, MemberCredential, Work
from persona_service.orgs.keys import KEY_PREFIXES
from persona_service.orgs.keys_repository import KeyRepository
from persona_service.orgs.repository import OrgRepository


class OrgCredentialStore:
    key_prefixes: tuple[str, ...] = KEY_PREFIXES

    def find_key(self, work: Work, secret_hash: str) -> KeyCredential | None:
        return work.of(KeyRepository).find_for_auth(secret_hash)

    def find_member(self, work: Work, org_id: str, user_id: str, workspace_id: str) -> MemberCredential | None:
        return work.of(OrgRepository).member(org_id, user_id, workspace_id)

    def hold_member(self, work: Work, org_id: str, user_id: str) -> bool:
        return work.of(OrgRepository).hold_member(org_id, user_id)
