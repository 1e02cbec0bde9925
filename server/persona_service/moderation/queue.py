"""The moderation queue: platform administrators claim and resolve review
items; a resolution acts on its subject through the module that owns it
(Module.review_resolvers). Services never commit."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from persona_service.kernel.api import (
    CursorCodec,
    NotFound,
    Principal,
    ReviewResolver,
    StateConflict,
    Work,
    keyset_page,
    utcnow,
)
from persona_service.moderation.records import ReviewFilters, ReviewRecord
from persona_service.moderation.repository import ModerationRepository

CLAIM = timedelta(minutes=10)


class ModerationQueue:
    def __init__(self, work: Work, *, cursors: CursorCodec | None = None,
                 resolvers: Mapping[str, ReviewResolver] | None = None) -> None:
        self.work = work
        self._repo = work.of(ModerationRepository)
        self.cursors = cursors
        self.resolvers = resolvers or {}

    def list(self, filters: ReviewFilters, cursor: str, limit: int) -> tuple[list[ReviewRecord], str]:
        return keyset_page(self.cursors, filters.scope(), limit, cursor,
                           lambda n, after: self._repo.open_page(filters, n, after), "created_at")

    def claim(self, principal: Principal, review_id: str) -> ReviewRecord:
        now = utcnow()
        self._open_to(principal, review_id, now)
        return self._repo.claim(review_id, principal.user_id, now + CLAIM)

    def resolve(self, principal: Principal, review_id: str, decision: str, note: str) -> ReviewRecord:
        now = utcnow()
        self._open_to(principal, review_id, now)
        resolved = self._repo.resolve(review_id, decision, note, principal.user_id, now)
        act = self.resolvers.get(resolved.subject_type)
        if act is not None:
            act(self.work, resolved.subject_id, decision)
        return resolved

    def _open_to(self, principal: Principal, review_id: str, now: datetime) -> ReviewRecord:
        """The item, locked (two administrators at once are served one after the other), if it is open to this
        one: pending, claimed by them, or claimed by someone whose claim lapsed; else 404 or 409."""
        review = self._repo.lock(review_id)
        if review is None:
            raise NotFound("review item")
        lapsed = review.claim_expires_at is not None and review.claim_expires_at < now
        if review.status == "pending" or (review.status == "claimed" and (
                review.claimed_by == principal.user_id or lapsed)):
            return review
        raise StateConflict(f"The review item is {review.status}" + (
            " by another administrator." if review.status == "claimed" else "."), "status", {"status": review.status})
