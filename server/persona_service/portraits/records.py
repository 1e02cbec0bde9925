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


@dataclass(frozen=True, slots=True)
class NewPortrait:
    """A portrait as requested (pending until the render task takes it)."""

    id: str
    org_id: str
    workspace_id: str
    persona_id: str
    conversation_id: str
    storage_key: str
    style: str
    prompt: str = ""
    instruction: str = ""
    parent_portrait_id: str | None = None
    status: str = "pending"


@dataclass(frozen=True, slots=True)
class PortraitChanges:
    """What a change of a portrait's status sets with it (None: left as it is)."""

    status: str
    canonical: bool | None = None
    size: int | None = None
    width: int | None = None
    height: int | None = None
    failure_code: str | None = None
