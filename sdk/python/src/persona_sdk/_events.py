"""The events of the streams (their messages are not components of the OpenAPI document)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from ._models import BaseModel
from .types import ChatMessage, ChatSession, CompletionUsage, ErrorObject, Persona


class _CamelCase(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)


class PipelineEvent(_CamelCase):
    """One event of a persona generation stream (proto: persona.v1.PipelineEvent)."""

    event: str
    """`run.started`, `step.started`, `step.completed`, `persona` or `error`."""
    run_id: str | None = None
    """The generation run."""
    step: str | None = None
    """The step, for step events: `moderate_intent`, `draft_soul`, `write_voice`, `audit`, `fingerprint`."""
    duration_ms: int | None = None
    """The step's duration in milliseconds, for `step.completed`."""
    persona: Persona | None = None
    """The finished persona, for `persona`."""
    error: ErrorObject | None = None
    """The error, for `error` (the SDK raises it instead of yielding it)."""


class ChatMessageEvent(_CamelCase):
    """One event of a streamed chat reply (proto: persona.v1.ChatMessageEvent)."""

    event: str
    """`message.started`, `message.delta`, `message.completed` or `error`."""
    delta: str = ""
    """A piece of the reply's text, for `message.delta`."""
    user_message: ChatMessage | None = None
    """The stored user message, for `message.started` and `message.completed`."""
    reply: ChatMessage | None = None
    """The stored reply with its `usage` (tokens, `cost_usd_micros`), for `message.completed`."""
    session: ChatSession | None = None
    """The session after the exchange, for `message.completed`."""
    error: ErrorObject | None = None
    """The error, for `error` (the SDK raises it instead of yielding it)."""


class ChoiceDelta(BaseModel):
    """What a chunk adds to the reply."""

    role: str | None = None
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChoiceDelta = ChoiceDelta()
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    """One chunk of a streamed chat completion, in OpenAI's shape (`object: chat.completion.chunk`)."""

    id: str
    object: str
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None
