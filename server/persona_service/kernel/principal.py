"""Who is calling, as established by authentication."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

SCOPES = ("personas:read", "personas:write", "chat:read", "chat:write", "config:read", "config:write")
ROLES = ("owner", "admin", "member")
PLANS = ("free", "pro", "team", "enterprise")

# Platform administration, in the `<resource>:<action>` style of the six.
# Every admin-only RPC requires it besides the caller being a platform
# administrator (checked at startup: `platform_admin` RPCs declare it, and
# only they), so a key's scopes confine an administrator's power too. A key
# holds it only if a platform administrator granted it; a platform
# administrator's session JWT (the person's own credential) carries it.
ADMIN_SCOPE = "platform:admin"
# What an API key may be granted, in their canonical order.
KEY_SCOPES = (*SCOPES, ADMIN_SCOPE)

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


def session_scopes(role: str, platform_admin: bool) -> frozenset[str]:
    """A session JWT's scopes: its role's, and platform administration for a platform administrator."""
    return ROLE_SCOPES[role] | {ADMIN_SCOPE} if platform_admin else ROLE_SCOPES[role]


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
    # Reads every workspace of the organization's events and audit log: a
    # session of a member no SCIM group confines to workspaces. API keys
    # (scoped to a workspace) and confined members' sessions are not.
    org_wide: bool = False
