"""Typed records of the moderation module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class ReviewRecord:
    id: str
    org_id: str
    workspace_id: str
    stage: str
    subject_type: str
    subject_id: str
    categories: list[str]
    scores: Any
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
