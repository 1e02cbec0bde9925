"""Who is calling, as established by authentication."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from datetime import datetime

from persona_service.kernel.json_values import JSONObject

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
# What a session JWT carries, by membership role (with the scopes these imply).
ROLE_SCOPES = {"owner": SCOPES, "admin": SCOPES, "member": tuple(s for s in SCOPES if s != "config:write")}


@dataclass(frozen=True)
class Scope:
    """A scope a module adds (Module.scopes), beyond the six an API key is
    given: e.g. the one scope of a credential kind the module issues."""

    name: str
    # One of the six whose holders hold this one too.
    implied_by: str | None = None
    # It confines its holder: a credential holding nothing but confining
    # scopes reaches only the RPCs that require one of them (not even those
    # that require no scope).
    confined: bool = False


# Filled from the modules' declarations (install_scopes).
IMPLIED_SCOPES: dict[str, frozenset[str]] = {}
CONFINED_SCOPES: set[str] = set()


def install_scopes(scopes: Iterable[Scope]) -> None:
    for scope in scopes:
        if scope.implied_by is not None:
            IMPLIED_SCOPES[scope.implied_by] = IMPLIED_SCOPES.get(scope.implied_by, frozenset()) | {scope.name}
        if scope.confined:
            CONFINED_SCOPES.add(scope.name)


def with_implied(scopes: Iterable[str]) -> frozenset[str]:
    held = frozenset(scopes)
    return held.union(*(IMPLIED_SCOPES.get(s, ()) for s in held))


def session_scopes(role: str, platform_admin: bool) -> frozenset[str]:
    """A session JWT's scopes: its role's, and platform administration for a platform administrator."""
    scopes = with_implied(ROLE_SCOPES[role])  # implied now: the modules declare implications at startup
    return scopes | {ADMIN_SCOPE} if platform_admin else scopes


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


def principal_json(principal: Principal) -> JSONObject:
    """A principal as JSON (a durable run's caller, kernel.transport.runs): who it is, never its credential."""
    return {**asdict(principal), "scopes": sorted(principal.scopes), "ip_allowlist": list(principal.ip_allowlist),
            "expires_at": principal.expires_at.isoformat() if principal.expires_at is not None else None}


def principal_from_json(data: JSONObject) -> Principal:
    """The principal `principal_json` wrote (a KeyError or TypeError on anything else; `org_wide` is False where
    an earlier release wrote none)."""
    unknown = data.keys() - {f.name for f in fields(Principal)}
    if unknown:
        raise TypeError(f"not a principal's field: {sorted(unknown)}")
    expires, role = data.get("expires_at"), data["role"]
    return Principal(
        kind=_text(data["kind"]), credential_id=_text(data["credential_id"]), org_id=_text(data["org_id"]),
        workspace_id=_text(data["workspace_id"]), user_id=_text(data["user_id"]),
        scopes=frozenset(_texts(data["scopes"])), role=None if role is None else _text(role),
        plan=_text(data["plan"]), is_platform_admin=_flag(data["is_platform_admin"]),
        ip_allowlist=tuple(_texts(data["ip_allowlist"])),
        expires_at=datetime.fromisoformat(_text(expires)) if expires else None,
        org_wide=_flag(data.get("org_wide", False)))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {type(value).__name__}")
    return value


def _texts(value: object) -> list[str]:
    if not isinstance(value, list):
        raise TypeError(f"not a list: {type(value).__name__}")
    return [_text(item) for item in value]


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"not a boolean: {type(value).__name__}")
    return value
