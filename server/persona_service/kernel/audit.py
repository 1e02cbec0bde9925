"""The audit log: who did what, to what, with which outcome."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from persona_service.kernel import ids
from persona_service.kernel.access import log_workspace
from persona_service.kernel.audit_repository import FILTERS, AuditRepository
from persona_service.kernel.cursors import CursorCodec, keyset_page
from persona_service.kernel.principal import Principal


@dataclass
class AuditEntry:
    action: str
    outcome: str  # success | failure
    status: int
    request_id: str
    client_ip: str | None
    org_id: str | None = None
    workspace_id: str | None = None
    actor_user_id: str | None = None
    credential_id: str | None = None
    resource_type: str = ""
    resource_id: str = ""
    error_code: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def for_principal(cls, principal: Principal | None, **kw) -> AuditEntry:
        if principal is not None:
            kw.setdefault("org_id", principal.org_id)
            kw.setdefault("workspace_id", principal.workspace_id)
            kw.setdefault("actor_user_id", principal.user_id)
            kw.setdefault("credential_id", principal.credential_id)
        return cls(**kw)


def action_name(method_name: str, resource_type: str) -> str:
    """`CreateApiKey` + `api_key` → `api_key.create`."""
    match = re.match(r"[A-Z][a-z]*", method_name)
    verb = match.group(0).lower() if match else method_name.lower()
    return f"{resource_type or 'rpc'}.{verb}"


class AuditLog:
    def __init__(self, conn, cursors: CursorCodec | None = None):
        self.repo = AuditRepository(conn)
        self.cursors = cursors

    def record(self, entry: AuditEntry) -> None:
        values = {k: v for k, v in entry.__dict__.items()}
        values["client_ip"] = values["client_ip"] or ""
        self.repo.add(id=ids.new_id("audit_event"), **values)

    def list(self, principal: Principal, filters: dict[str, str], page_size: int, page_token: str):
        wanted = {k: filters.get(k, "") for k in FILTERS}
        return keyset_page(
            self.cursors, f"audit:{principal.org_id}", page_size, page_token,
            lambda limit, after: self.repo.list_page(principal.org_id, log_workspace(principal), wanted, limit, after),
            "occurred_at",
        )
