"""The audit log: who did what, to what, with which outcome."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from persona_service.kernel import ids
from persona_service.kernel.data.audit_repository import FILTERS, AuditRecord, AuditRepository
from persona_service.kernel.data.work import Work, connection_of
from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.access import log_workspace
from persona_service.kernel.transport.cursors import CursorCodec, keyset_page


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
    details: JSONObject = field(default_factory=dict)

    @classmethod
    def for_principal(cls, principal: Principal | None, *, action: str, outcome: str, status: int, request_id: str,
                      client_ip: str | None, resource_type: str = "", resource_id: str = "", error_code: str = "",
                      details: JSONObject | None = None) -> AuditEntry:
        """An entry for what `principal` did: its org, workspace, user and credential (none for an anonymous call)."""
        return cls(action, outcome, status, request_id, client_ip,
                   org_id=principal.org_id if principal is not None else None,
                   workspace_id=principal.workspace_id if principal is not None else None,
                   actor_user_id=principal.user_id if principal is not None else None,
                   credential_id=principal.credential_id if principal is not None else None,
                   resource_type=resource_type, resource_id=resource_id, error_code=error_code,
                   details={} if details is None else details)


def action_name(method_name: str, resource_type: str) -> str:
    """`CreateApiKey` + `api_key` → `api_key.create`."""
    match = re.match(r"[A-Z][a-z]*", method_name)
    verb = match.group(0).lower() if match else method_name.lower()
    return f"{resource_type or 'rpc'}.{verb}"


class AuditLog:
    def __init__(self, work: Work, cursors: CursorCodec | None = None) -> None:
        self._repo = AuditRepository(connection_of(work)())
        self.cursors = cursors

    def record(self, entry: AuditEntry) -> None:
        self._repo.add(
            id=ids.new_id("audit_event"), action=entry.action, outcome=entry.outcome, status=entry.status,
            request_id=entry.request_id, client_ip=entry.client_ip or "", org_id=entry.org_id,
            workspace_id=entry.workspace_id, actor_user_id=entry.actor_user_id, credential_id=entry.credential_id,
            resource_type=entry.resource_type, resource_id=entry.resource_id, error_code=entry.error_code,
            details=entry.details)

    def list(self, principal: Principal, filters: dict[str, str], limit: int,
             cursor: str) -> tuple[list[AuditRecord], str]:
        wanted = {k: filters.get(k, "") for k in FILTERS}
        return keyset_page(
            self.cursors, f"audit:{principal.org_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.org_id, log_workspace(principal), wanted, n, after),
            "occurred_at",
        )


class FailureTally:
    """Failed authentications in the audit log, bounded: per client address
    and credential, the first failure of each `every` seconds is written at
    once (with its request id); the others are counted, and the last of them
    written once the interval is over (`due`, a periodic job) with
    `details.repeated` saying how many failures the row stands for. A flood of
    bad credentials writes a row per address and credential a few times a
    minute, not one per request (each was a connection and an insert)."""

    def __init__(self, every: float = 10.0, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.every, self._max_keys, self._clock = every, max_keys, clock  # `clock`: tests move it
        self._open: dict[tuple[str | None, str | None, str | None] | None, _Window] = {}  # (address, org, credential) -> its interval; None: overflow
        self._lock = threading.Lock()

    def admit(self, entry: AuditEntry) -> list[AuditEntry]:
        """The rows to write now for this failure: none while its interval holds it back."""
        now = self._clock()
        key: tuple[str | None, str | None, str | None] | None = (entry.client_ip, entry.org_id, entry.credential_id)
        with self._lock:
            window = self._open.get(key)
            if window is not None and now - window.opened < self.every:
                window.hold(entry)
                return []
            rows = [] if window is None else window.summary()
            if window is None and len(self._open) >= self._max_keys:
                rows += self._close(now)
                if len(self._open) >= self._max_keys:  # that many addresses at once: one interval for the rest
                    window = self._open.setdefault(None, _Window(now))
                    window.hold(entry)
                    return rows
            self._open[key] = _Window(now)
            return [*rows, entry]

    def due(self) -> list[AuditEntry]:
        """The rows of the intervals that are over (their held-back failures)."""
        with self._lock:
            return self._close(self._clock())

    def _close(self, now: float) -> list[AuditEntry]:
        over = [key for key, window in self._open.items() if now - window.opened >= self.every]
        return [row for key in over for row in self._open.pop(key).summary()]


@dataclass
class _Window:
    opened: float
    held: int = 0
    last: AuditEntry | None = None

    def hold(self, entry: AuditEntry) -> None:
        self.held, self.last = self.held + 1, entry

    def summary(self) -> list[AuditEntry]:
        if self.last is None:
            return []
        return [replace(self.last, details={**self.last.details, "repeated": self.held})]
