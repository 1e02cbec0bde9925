from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, tuple_, update

from persona_service.kernel.api import declare_aggregate, lock_root, record, record_or_none, records, table_of
from persona_service.moderation.records import ReviewRecord
from persona_service.moderation.tables import OPEN, ModerationReview

_reviews = table_of(ModerationReview)
# A review item on its own: a claim and a resolution lock it first (`lock`), then decide on its status and claim
# (kernel.data.aggregates; the lock order is docs/concurrency.md's).
REVIEW = declare_aggregate("moderation_review", _reviews)


class ModerationRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values: Any) -> None:
        self.conn.execute(insert(_reviews).values(**values))

    def get(self, review_id: str) -> ReviewRecord | None:
        stmt = select(_reviews).where(_reviews.c.id == review_id)
        return record_or_none(ReviewRecord, self.conn.execute(stmt).mappings().first())

    def open_page(self, filters: dict[str, str], limit: int, after: tuple[datetime, str] | None) -> list[ReviewRecord]:
        """Pending and claimed items, oldest first."""
        stmt = select(_reviews).where(OPEN)
        if filters.get("stage"):
            stmt = stmt.where(_reviews.c.stage == filters["stage"])
        if filters.get("org_id"):
            stmt = stmt.where(_reviews.c.org_id == filters["org_id"])
        if filters.get("category"):
            stmt = stmt.where(_reviews.c.categories.any(filters["category"]))
        if after is not None:
            stmt = stmt.where(tuple_(_reviews.c.created_at, _reviews.c.id) > tuple_(*after))
        stmt = stmt.order_by(_reviews.c.created_at, _reviews.c.id).limit(limit)
        return records(ReviewRecord, self.conn.execute(stmt).mappings())

    def lock(self, review_id: str) -> ReviewRecord | None:
        """The item, its row locked until the unit of work ends: a claim or resolution decides on it after this."""
        return lock_root(self.conn, REVIEW, ReviewRecord, _reviews.c.id == review_id)

    def update(self, review_id: str, **values: Any) -> ReviewRecord:
        stmt = update(_reviews).where(_reviews.c.id == review_id).values(**values).returning(_reviews)
        return record(ReviewRecord, self.conn.execute(stmt).mappings().one())
