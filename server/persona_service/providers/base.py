"""The provider interface and its errors.

Implementations: `local.LocalProvider` (deterministic, no network, the
default) and `openai_http.OpenAIHTTPProvider` (any OpenAI-compatible HTTP
API). `retrying.Retrying` wraps either with the spec's backoff.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from persona_service.kernel.errors import ApiError


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant | tool
    content: str
    name: str = ""
    tool_call_id: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    input_tokens: int
    output_tokens: int
    finish_reason: str = "stop"  # stop | length | tool_calls
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Delta:
    """One streamed piece: text, a tool-call fragment, or (last) the usage."""

    text: str = ""
    tool_call: ToolCall | None = None
    tool_call_index: int = 0
    finish_reason: str = ""
    usage: Completion | None = None  # set on the final delta only


@dataclass(frozen=True)
class ModerationResult:
    flagged: bool
    categories: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationOptions:
    temperature: float | None = None
    max_tokens: int | None = None
    # "json": the reply must be one JSON object (OpenAI response_format json_object).
    response_format: str = "text"
    tools: tuple[dict[str, Any], ...] = ()  # OpenAI tool definitions, passed through
    tool_choice: Any = None
    # What the call is for ("soul", "voice", "reply", "audit", ...). Real
    # providers ignore it; the local provider uses it to stay deterministic.
    task: str = "reply"
    model: str = ""  # override of the configured model


class Provider(Protocol):
    name: str

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion: ...

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]: ...

    def moderate(self, text: str) -> ModerationResult: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class ProviderError(ApiError):
    """The upstream failed (5xx, malformed reply, refused). `upstream` holds
    its error envelope for the audit log; it is never rendered to callers."""

    code = "provider_error"

    def __init__(self, provider: str, message: str = "", upstream: dict[str, Any] | None = None, status: int | None = None):
        super().__init__(None, {"provider": provider})
        self.provider = provider
        self.upstream = upstream or {}
        self.upstream_status = status
        self.reason = message


class ProviderTimeout(ProviderError):
    code = "provider_timeout"
