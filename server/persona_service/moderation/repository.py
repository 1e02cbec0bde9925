from __future__ import annotations

from sqlalchemy import Connection, insert

from persona_service.kernel.db.base import table_of
from persona_service.moderation.tables import ModerationReview

_reviews = table_of(ModerationReview)


class ModerationRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values) -> None:
        self.conn.execute(insert(_reviews).values(**values))
