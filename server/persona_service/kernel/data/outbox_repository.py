from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, tuple_

from persona_service.kernel.data.base import seen_from, table_of
from persona_service.kernel.data.records import record_or_none, records, row_columns
from persona_service.kernel.data.tables import EVENT_PERSONA, OutboxEvent

_events = table_of(OutboxEvent)


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    org_id: str
    workspace_id: str
    type: str
    occurred_at: datetime
    data: Any


class EventRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, event: EventRecord) -> None:
        """The event as it is read back (its `seq` and `dispatched_at` are the log's and the worker's)."""
        self.conn.execute(insert(_events).values(**row_columns(event)))

    def get(self, org_id: str, workspace_id: str | None, event_id: str) -> EventRecord | None:
        stmt = select(_events).where(_events.c.id == event_id, _events.c.org_id == org_id,
                                     seen_from(_events.c.workspace_id, workspace_id))
        return record_or_none(EventRecord, self.conn.execute(stmt).mappings().first())

    def list_page(
        self, org_id: str, workspace_id: str | None, type_: str, persona_id: str, limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[EventRecord]:
        stmt = select(_events).where(_events.c.org_id == org_id, seen_from(_events.c.workspace_id, workspace_id))
        if type_:
            stmt = stmt.where(_events.c.type == type_)
        if persona_id:
            stmt = stmt.where(EVENT_PERSONA == persona_id)
        if after is not None:
            stmt = stmt.where(tuple_(_events.c.occurred_at, _events.c.id) < tuple_(*after))
        stmt = stmt.order_by(_events.c.occurred_at.desc(), _events.c.id.desc()).limit(limit)
        return records(EventRecord, self.conn.execute(stmt).mappings())
