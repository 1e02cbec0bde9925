"""Typed records of the privacy module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ExportRecord:
    id: str
    org_id: str
    user_id: str
    status: str
    storage_key: str
    sha256: str
    error: str
    created_at: datetime
    completed_at: datetime | None
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Erasure:
    """What an erasure did (counts by kind), and the organizations it erased in."""

    counts: dict[str, int]
    org_ids: tuple[str, ...]
