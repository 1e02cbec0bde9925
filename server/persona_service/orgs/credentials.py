"""The kernel's credential store, implemented on this module's tables:
API keys by secret hash, and memberships for session tokens."""

from __future__ import annotations

from sqlalchemy import Connection

from persona_service.kernel.auth import KeyCredential, MemberCredential
from persona_service.orgs.keys_repository import KeyRepository
from persona_service.orgs.repository import OrgRepository


class OrgCredentialStore:
    def find_key(self, conn: Connection, secret_hash: str) -> KeyCredential | None:
        row = KeyRepository(conn).find_for_auth(secret_hash)
        if row is None:
            return None
        return KeyCredential(
            id=row["id"], org_id=row["org_id"], workspace_id=row["workspace_id"], user_id=row["created_by_user_id"],
            scopes=frozenset(row["scopes"]), role=row["role"], plan=row["plan"],
            is_platform_admin=row["is_platform_admin"], ip_allowlist=tuple(row["ip_allowlist"] or ()),
            expires_at=row["expires_at"], revoked_at=row["revoked_at"],
        )

    def find_member(self, conn: Connection, org_id: str, user_id: str, workspace_id: str) -> MemberCredential | None:
        repo = OrgRepository(conn)
        member = repo.member(org_id, user_id)
        workspace = repo.workspace_of(workspace_id)
        if member is None or workspace is None or workspace["org_id"] != org_id:
            return None
        return MemberCredential(role=member["role"], plan=member["plan"], is_platform_admin=member["is_platform_admin"])
