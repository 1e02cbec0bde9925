"""Who is calling, as established by authentication."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

SCOPES = ("personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write")
ROLES = ("owner", "admin", "member")
PLANS = ("free", "pro", "team", "enterprise")

# Scopes a session JWT carries, by membership role.
ROLE_SCOPES = {
    "owner": frozenset(SCOPES),
    "admin": frozenset(SCOPES),
    "member": frozenset(s for s in SCOPES if s != "config:write"),
}


@dataclass(frozen=True)
class Principal:
    kind: str  # "api_key" | "session"
    credential_id: str  # key id, or "jwt:<jti>"
    org_id: str
    workspace_id: str
    user_id: str
    scopes: frozenset[str]
    role: str | None  # membership role (of the key's creator, for API keys)
    plan: str
    is_platform_admin: bool
    ip_allowlist: tuple[str, ...] = ()
    expires_at: datetime | None = None
