"""Typed records of the portraits module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# A portrait an edit may start from (spec: "canonical, variant or earlier edit").
EDITABLE = ("generated", "approved")
SETTLED = ("generated", "approved", "rejected", "failed")


@dataclass(frozen=True, slots=True)
class PortraitRecord:
    id: str
    org_id: str
    workspace_id: str
    persona_id: str
    conversation_id: str
    parent_portrait_id: str | None
    instruction: str
    prompt: str
    style: str
    status: str
    canonical: bool
    storage_key: str
    size: int
    width: int
    height: int
    failure_code: str
    created_at: datetime
    updated_at: datetime
