"""Who is calling, as established by authentication."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

SCOPES = ("personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write")
ROLES = ("owner", "admin", "member")
PLANS = ("free", "pro", "team", "enterprise")

# Provisioning through SCIM. Not one of the six scopes an API key is given:
# SCIM tokens hold it alone, and `config:write` implies it.
SCIM_SCOPE = "scim:provision"
IMPLIED_SCOPES = {"config:write": frozenset({SCIM_SCOPE})}
# Scopes that confine their holder: a credential holding nothing else reaches
# only the RPCs that require one of them (a SCIM token cannot read personas
# through an RPC that requires no scope).
CONFINED_SCOPES = frozenset({SCIM_SCOPE})


def with_implied(scopes) -> frozenset[str]:
    held = frozenset(scopes)
    return held.union(*(IMPLIED_SCOPES.get(s, ()) for s in held))


# Scopes a session JWT carries, by membership role.
ROLE_SCOPES = {
    "owner": with_implied(SCOPES),
    "admin": with_implied(SCOPES),
    "member": with_implied(s for s in SCOPES if s != "config:write"),
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
