"""Usage over time: the billed replies of a workspace, summed by day, persona or key."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, func, select

from persona_service.chat.records import UsageRow
from persona_service.chat.tables import ChatMessage, ChatSession
from persona_service.kernel.api import records, table_of

_messages = table_of(ChatMessage)
_sessions = table_of(ChatSession)


class UsageRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def usage(self, workspace_id: str, start: datetime, end: datetime, group_by: str, persona_id: str = "",
              key_id: str = "") -> list[UsageRow]:
        """Sums over the replies created in [start, end) (every one billed: removed ones and unchosen
        alternatives too), one row per UTC day (`YYYY-MM-DD`), persona or credential with usage."""
        day = func.to_char(func.timezone("UTC", _messages.c.created_at), "YYYY-MM-DD")
        key = {"day": day, "persona": _sessions.c.persona_id, "key": _messages.c.credential_id}[group_by]
        stmt = (
            select(
                key.label("key"),
                func.coalesce(func.sum(_messages.c.input_tokens), 0).label("input_tokens"),
                func.coalesce(func.sum(_messages.c.output_tokens), 0).label("output_tokens"),
                func.coalesce(func.sum(_messages.c.cost_usd_micros), 0).label("cost_usd_micros"),
                func.count().label("generations"),
                func.count().filter(_messages.c.unpriced).label("unpriced_generations"),
            )
            .select_from(_messages.join(_sessions, _sessions.c.id == _messages.c.session_id))
            .where(_messages.c.workspace_id == workspace_id, _messages.c.role == "assistant",
                   _messages.c.created_at >= start, _messages.c.created_at < end)
            .group_by(key)
            .order_by(key)
        )
        if persona_id:
            stmt = stmt.where(_sessions.c.persona_id == persona_id)
        if key_id:
            stmt = stmt.where(_messages.c.credential_id == key_id)
        return records(UsageRow, self._conn.execute(stmt).mappings())
