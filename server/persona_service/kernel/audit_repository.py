from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, select, tuple_

from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.tables import AuditEvent

_events = table_of(AuditEvent)

FILTERS = ("action", "outcome", "actor_user_id", "credential_id", "resource_type", "resource_id", "request_id")


class AuditRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values) -> None:
        self.conn.execute(insert(_events).values(**values))

    def list_page(self, org_id: str, filters: dict[str, str], limit: int, after: tuple[datetime, str] | None):
        """Newest first, keyset-paginated on (occurred_at, id)."""
        stmt = select(_events).where(_events.c.org_id == org_id)
        for name, value in filters.items():
            if value:
                stmt = stmt.where(_events.c[name] == value)
        if after is not None:
            stmt = stmt.where(tuple_(_events.c.occurred_at, _events.c.id) < tuple_(*after))
        stmt = stmt.order_by(_events.c.occurred_at.desc(), _events.c.id.desc()).limit(limit)
        return self.conn.execute(stmt).mappings().all()
