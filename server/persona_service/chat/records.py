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
    removed_messages: int = 0
    unpriced_replies: int = 0  # replies billed without a price (their cost unknown)


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session as it opens: active, nothing counted yet."""

    id: str
    org_id: str
    workspace_id: str
    persona_id: str
    user_id: str
    title: str
    started_at: datetime
    last_active_at: datetime
    persona_version: int | None  # pinned version; None: the persona's current one
    status: str = "active"
    message_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd_micros: int = 0


@dataclass(frozen=True, slots=True)
class SessionChanges:
    """What a change of a session's status sets with it (None: left as it is)."""

    status: str
    ended_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SessionFilters:
    """A list's filters ("": any)."""

    persona_id: str = ""
    status: str = ""
    user_id: str = ""


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
    swipe: int = 0
    selected: bool = True
    edited: bool = False
    deleted_at: datetime | None = None
    credential_id: str = ""
    unpriced: bool = False  # billed without a price: its cost is unknown, not 0
    # How many alternatives its turn keeps, and its position among them (read with the message; not columns).
    swipe_count: int = 1
    swipe_index: int = 0


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to store: a user's (no usage), or a reply with its usage."""

    id: str
    session_id: str
    org_id: str
    workspace_id: str
    ordinal: int
    role: str
    content: str
    credential_id: str  # what its usage is billed to (chat.service.billed_to)
    created_at: datetime
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd_micros: int = 0
    drift_score: float = 0.0
    recovered: bool = False
    unpriced: bool = False


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """A sent message's stream began: its user message is on its way (the reply's deltas follow)."""


@dataclass(frozen=True, slots=True)
class MessageDelta:
    """A piece of the reply's text, as the model streamed it."""

    text: str


# What `ChatSessionService.send` yields as it goes.
MessageProgress = MessageStarted | MessageDelta


@dataclass(frozen=True, slots=True)
class Exchange:
    """One message sent and its reply, with the session's counters after it."""

    session: SessionRecord
    user_message: MessageRecord
    reply: MessageRecord


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Usage of one bucket (a UTC day `YYYY-MM-DD`, a persona id or a key; "" for the totals)."""

    key: str
    input_tokens: int
    output_tokens: int
    cost_usd_micros: int
    generations: int
    unpriced_generations: int = 0
