from __future__ import annotations

from sqlalchemy import Connection, insert, select, tuple_

from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.tables import OutboxEvent

_events = table_of(OutboxEvent)


class EventRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values) -> None:
        self.conn.execute(insert(_events).values(**values))

    def get(self, org_id: str, event_id: str):
        return self.conn.execute(select(_events).where(_events.c.id == event_id, _events.c.org_id == org_id)).mappings().first()

    def list_page(self, org_id: str, type_: str, persona_id: str, limit: int, after):
        stmt = select(_events).where(_events.c.org_id == org_id)
        if type_:
            stmt = stmt.where(_events.c.type == type_)
        if persona_id:
            stmt = stmt.where(_events.c.data["personaId"].astext == persona_id)
        if after is not None:
            stmt = stmt.where(tuple_(_events.c.occurred_at, _events.c.id) < tuple_(*after))
        stmt = stmt.order_by(_events.c.occurred_at.desc(), _events.c.id.desc()).limit(limit)
        return self.conn.execute(stmt).mappings().all()
