"""Typed records of the chat module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str
    org_id: str
    workspace_id: str
    persona_id: str
    user_id: str
    title: str
    status: str
    message_count: int
    input_tokens: int
    output_tokens: int
    cost_usd_micros: int
    started_at: datetime
    last_active_at: datetime
    ended_at: datetime | None
    persona_version: int | None  # pinned version; None: the persona's current one


@dataclass(frozen=True, slots=True)
class MessageRecord:
    id: str
    session_id: str
    org_id: str
    workspace_id: str
    ordinal: int
    role: str
    content: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd_micros: int
    drift_score: float
    recovered: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Exchange:
    """One message sent and its reply, with the session's counters after it."""

    session: SessionRecord
    user_message: MessageRecord
    reply: MessageRecord
