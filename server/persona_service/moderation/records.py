"""Typed records of the moderation module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ReviewRecord:
    id: str
    org_id: str
    workspace_id: str
    stage: str
    subject_type: str
    subject_id: str
    categories: list[str]
    scores: dict[str, object]  # its JSON column: category -> score, as the flag wrote it
    excerpt: str
    status: str
    claimed_by: str
    claim_expires_at: datetime | None
    decision: str
    note: str
    resolved_by: str
    resolved_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ReviewFilters:
    """Which open review items a page of the queue shows ("": any)."""

    stage: str = ""
    category: str = ""
    org_id: str = ""

    def scope(self) -> str:
        """The scope a page's cursor is bound to: the filters given, by name."""
        given = (("category", self.category), ("org_id", self.org_id), ("stage", self.stage))
        return "moderation:" + ":".join(f"{name}={value}" for name, value in given if value)


@dataclass(frozen=True, slots=True)
class NewReview:
    """A review item as a non-pass verdict records it (pending)."""

    id: str
    org_id: str
    workspace_id: str
    stage: str
    subject_type: str
    subject_id: str
    categories: list[str]
    scores: dict[str, float]
    excerpt: str
