from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, select, tuple_, update

from persona_service.kernel.api import (
    declare_aggregate,
    lock_root,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.moderation.records import NewReview, ReviewFilters, ReviewRecord
from persona_service.moderation.tables import OPEN, ModerationReview

_reviews = table_of(ModerationReview)
# A review item on its own: a claim and a resolution lock it first (`lock`), then decide on its status and claim
# (kernel.data.aggregates; the lock order is docs/concurrency.md's).
REVIEW = declare_aggregate("moderation_review", _reviews)


class ModerationRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def add(self, review: NewReview) -> None:
        self._conn.execute(insert(_reviews).values(**row_columns(review)))

    def get(self, review_id: str) -> ReviewRecord | None:
        stmt = select(_reviews).where(_reviews.c.id == review_id)
        return record_or_none(ReviewRecord, self._conn.execute(stmt).mappings().first())

    def open_page(self, filters: ReviewFilters, limit: int, after: tuple[datetime, str] | None) -> list[ReviewRecord]:
        """Pending and claimed items, oldest first."""
        stmt = select(_reviews).where(OPEN)
        if filters.stage:
            stmt = stmt.where(_reviews.c.stage == filters.stage)
        if filters.org_id:
            stmt = stmt.where(_reviews.c.org_id == filters.org_id)
        if filters.category:
            stmt = stmt.where(_reviews.c.categories.any(filters.category))
        if after is not None:
            stmt = stmt.where(tuple_(_reviews.c.created_at, _reviews.c.id) > tuple_(*after))
        stmt = stmt.order_by(_reviews.c.created_at, _reviews.c.id).limit(limit)
        return records(ReviewRecord, self._conn.execute(stmt).mappings())

    def lock(self, review_id: str) -> ReviewRecord | None:
        """The item, its row locked until the unit of work ends: a claim or resolution decides on it after this."""
        return lock_root(self._conn, REVIEW, ReviewRecord, _reviews.c.id == review_id)

    def claim(self, review_id: str, user_id: str, until: datetime) -> ReviewRecord:
        return self._set(review_id, status="claimed", claimed_by=user_id, claim_expires_at=until)

    def resolve(self, review_id: str, decision: str, note: str, user_id: str, at: datetime) -> ReviewRecord:
        """Resolved: its claim, if any, ends with it."""
        return self._set(review_id, status="resolved", decision=decision, note=note, resolved_by=user_id,
                         resolved_at=at, claim_expires_at=None)

    def _set(self, review_id: str, **columns: str | datetime | None) -> ReviewRecord:
        stmt = update(_reviews).where(_reviews.c.id == review_id).values(**columns).returning(_reviews)
        return record(ReviewRecord, self._conn.execute(stmt).mappings().one())
