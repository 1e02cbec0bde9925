from __future__ import annotations

from sqlalchemy import Connection, insert, select

from persona_service.db.models import ChatSession

_sessions = ChatSession.__table__


class ChatSessionRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def get(self, workspace_id: str, session_id: str):
        stmt = select(_sessions).where(_sessions.c.id == session_id, _sessions.c.workspace_id == workspace_id)
        return self.conn.execute(stmt).mappings().first()

    def create(self, **values):
        return self.conn.execute(insert(_sessions).values(**values).returning(_sessions)).mappings().one()
