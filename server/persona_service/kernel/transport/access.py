"""Authorization: does the principal satisfy an RPC's declared policy?"""

from __future__ import annotations

from collections.abc import Iterable

from persona_service.kernel.errors import Forbidden
from persona_service.kernel.principal import CONFINED_SCOPES, Principal


def log_workspace(principal: Principal) -> str | None:
    """The workspace whose events and audit rows a principal reads (with the
    organization's rows that concern no workspace): its own, as for every
    workspace resource; None (all of them) for an organization-wide session."""
    return None if principal.org_wide else principal.workspace_id


def authorize(principal: Principal, *, scope: str, roles: Iterable[str], platform_admin: bool) -> None:
    if platform_admin and not principal.is_platform_admin:
        raise Forbidden("Only platform administrators may do this.")
    if scope not in CONFINED_SCOPES and principal.scopes and principal.scopes <= CONFINED_SCOPES:
        raise Forbidden("This credential may call only the endpoints made for it.")
    if scope and scope not in principal.scopes:
        raise Forbidden(f"The credential lacks the `{scope}` scope.", {"requiredScope": scope})
    roles = tuple(roles)
    if roles and principal.role not in roles:
        raise Forbidden(f"The `{principal.role or 'no'}` role may not do this.", {"requiredRoles": list(roles)})
