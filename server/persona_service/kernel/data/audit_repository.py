from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, insert, literal, select, tuple_

from persona_service.kernel.data.base import seen_from, table_of
from persona_service.kernel.data.personal_data import Batches, Subject, export_batches
from persona_service.kernel.data.prepared import PreparedInsert
from persona_service.kernel.data.records import records
from persona_service.kernel.data.tables import AuditEvent
from persona_service.kernel.data.work import Work, connection_of

_events = table_of(AuditEvent)
# Every audited call's entry (issue 50): compiled once, run without SQLAlchemy's per-execution layers.
_add = PreparedInsert(insert(_events), ("id", "action", "outcome", "status", "request_id", "client_ip", "org_id",
                                        "workspace_id", "actor_user_id", "credential_id", "resource_type",
                                        "resource_id", "error_code", "details"))


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: str
    occurred_at: datetime
    org_id: str | None
    workspace_id: str | None
    actor_user_id: str | None
    credential_id: str | None
    action: str
    resource_type: str
    resource_id: str
    outcome: str
    status: int
    error_code: str
    request_id: str
    client_ip: str
    details: dict[str, object]  # a JSON object

FILTERS = ("action", "outcome", "actor_user_id", "credential_id", "resource_type", "resource_id", "request_id")
# Filters of a closed set written into the statement, not bound: `outcome = 'failure'` then
# implies the partial index ix_audit_events_org_failures in generic plans too (one per value).
_LITERAL = frozenset({"outcome"})


class AuditRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def by_actor(self, org_id: str, user_id: str) -> Batches:
        """What the user did in the organization, as JSON rows (privacy exports)."""
        stmt = select(_events).where(_events.c.org_id == org_id, _events.c.actor_user_id == user_id) \
            .order_by(_events.c.occurred_at)
        return export_batches(self.conn, stmt)

    def created_by(self, org_id: str, user_id: str, action: str) -> list[str]:
        """Ids of the resources the user created with `action` (creation RPCs are audited): the entry's
        `details.createdId` where the call made its resource under another's path (a fork), else its resource."""
        created = func.coalesce(_events.c.details["createdId"].astext, _events.c.resource_id)
        stmt = select(created).where(
            _events.c.org_id == org_id, _events.c.actor_user_id == user_id, _events.c.action == action,
            _events.c.outcome == "success", _events.c.resource_id != "",
        )
        return list(dict.fromkeys(self.conn.execute(stmt).scalars()))

    def credentials_of(self, org_id: str, user_id: str, action: str) -> list[str]:
        """The credentials (`api_key` ids, `jwt:<jti>`) the user called `action` with successfully."""
        stmt = select(_events.c.credential_id).distinct().where(
            _events.c.org_id == org_id, _events.c.actor_user_id == user_id, _events.c.action == action,
            _events.c.outcome == "success", _events.c.credential_id.is_not(None),
        )
        return sorted(self.conn.execute(stmt).scalars())

    def add(self, *, id: str, action: str, outcome: str, status: int, request_id: str, client_ip: str,
            org_id: str | None, workspace_id: str | None, actor_user_id: str | None, credential_id: str | None,
            resource_type: str, resource_id: str, error_code: str, details: dict[str, object]) -> None:
        _add.run(self.conn, dict(
            id=id, action=action, outcome=outcome, status=status, request_id=request_id, client_ip=client_ip,
            org_id=org_id, workspace_id=workspace_id, actor_user_id=actor_user_id, credential_id=credential_id,
            resource_type=resource_type, resource_id=resource_id, error_code=error_code, details=details))

    def list_page(self, org_id: str, workspace_id: str | None, filters: dict[str, str], limit: int,
                  after: tuple[datetime, str] | None) -> list[AuditRecord]:
        """Newest first, keyset-paginated on (occurred_at, id)."""
        stmt = select(_events).where(_events.c.org_id == org_id, seen_from(_events.c.workspace_id, workspace_id))
        for name, value in filters.items():
            if value:
                stmt = stmt.where(_events.c[name] == (literal(value, literal_execute=True) if name in _LITERAL else value))
        if after is not None:
            stmt = stmt.where(tuple_(_events.c.occurred_at, _events.c.id) < tuple_(*after))
        stmt = stmt.order_by(_events.c.occurred_at.desc(), _events.c.id.desc()).limit(limit)
        return records(AuditRecord, self.conn.execute(stmt).mappings())


def audit_events(work: Work, subject: Subject) -> dict[str, Batches]:
    """The kernel's own part of a privacy export: audit events about what the user did
    (here, not in personal_data.py, which this module uses: no import loop)."""
    return {"audit_events": AuditRepository(connection_of(work)()).by_actor(subject.org_id, subject.user_id)}


def created_resources(work: Work, subject: Subject, action: str) -> list[str]:
    """Ids of resources the user created (from the audit log: creation RPCs are audited)."""
    return AuditRepository(connection_of(work)()).created_by(subject.org_id, subject.user_id, action)


def credentials_used(work: Work, subject: Subject, action: str) -> list[str]:
    """The credentials the user called `action` with (from the audit log, which names every call's credential): what
    a module keeps per credential of theirs (an OpenAI-compatible completion's session) is theirs too."""
    return AuditRepository(connection_of(work)()).credentials_of(subject.org_id, subject.user_id, action)
