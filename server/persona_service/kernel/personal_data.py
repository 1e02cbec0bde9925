"""The personal-data port: what a module holds about one user of one
organization, for privacy exports (DSAR). Each module that keeps personal
data declares `Module.personal_data`; the privacy module assembles the
bundle. Rows are JSON-ready dicts; secrets (hashes, keys) are never in them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection

from persona_service.kernel.clock import iso


@dataclass(frozen=True)
class Subject:
    org_id: str
    user_id: str


def export_records(rows: Iterable[Mapping[Any, Any]], omit: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Database rows as JSON values, without the columns named in `omit`."""
    left_out = set(omit)
    return [{str(k): _json(v) for k, v in row.items() if k not in left_out} for row in rows]


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value


def audit_events(conn: Connection, subject: Subject) -> dict[str, list[dict[str, Any]]]:
    """The kernel's own part: audit events about what the user did."""
    from persona_service.kernel.audit_repository import AuditRepository  # it imports export_records from here

    return {"audit_events": AuditRepository(conn).by_actor(subject.org_id, subject.user_id)}


def created_resources(conn: Connection, subject: Subject, action: str) -> list[str]:
    """Ids of resources the user created (from the audit log: creation RPCs are audited)."""
    from persona_service.kernel.audit_repository import AuditRepository

    return AuditRepository(conn).created_by(subject.org_id, subject.user_id, action)
