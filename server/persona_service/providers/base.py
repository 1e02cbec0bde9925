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
    # What was found, where the provider says: (category, the text that matched).
    matches: tuple[tuple[str, str], ...] = ()


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
    # Assistant prefill: the reply's text so far (a streamed reply taken over mid-way, kernel.transport.runs). The
    # provider continues it and returns only what follows; one that cannot continue answers anew (docs/streams.md).
    continue_from: str = ""


@dataclass(frozen=True)
class ImagePrompt:
    """What a portrait is drawn from: who (a persona's stable id, name and
    traits) and how (a free prompt, a style)."""

    subject: str  # stable seed of the persona (its id)
    name: str = ""
    traits: tuple[str, ...] = ()
    prompt: str = ""
    style: str = "flat"

    def text(self) -> str:
        """The prompt an image model gets."""
        who = f"{self.name}, " if self.name else ""
        traits = f"who is {', '.join(self.traits)}; " if self.traits else ""
        extra = f"{self.prompt}; " if self.prompt else ""
        return f"Head-and-shoulders portrait of {who}{traits}{extra}style: {self.style}."


class ImageProvider(Protocol):
    """Draws and edits PNG portraits."""

    name: str

    def generate_image(self, prompt: ImagePrompt) -> bytes: ...

    def edit_image(self, image: bytes, instruction: str) -> bytes: ...


class Provider(Protocol):
    name: str

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion: ...

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]: ...

    def moderate(self, text: str) -> ModerationResult: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class ProviderError(ApiError):
    """The upstream failed (5xx, malformed reply, refused). `upstream` holds
    its error envelope for the audit log; it is never rendered to callers.

    What callers do see, in the envelope's `details`, says where to look and
    nothing more: `provider`, the upstream `operation` that failed (the
    OpenAI API's name for it: `chat.completions`, `moderations`,
    `embeddings`, ...) and `upstreamStatus`, the HTTP status when an answer
    came (none for timeouts and refused connections). Never a URL, a key or
    the upstream's own words."""

    code = "provider_error"

    def __init__(self, provider: str, message: str = "", upstream: dict[str, Any] | None = None,
                 status: int | None = None, operation: str = ""):
        super().__init__(None, {"provider": provider})
        self.provider = provider
        self.upstream = upstream or {}
        self.upstream_status = status
        self.reason = message
        self.operation = ""
        if status is not None:
            self.details["upstreamStatus"] = status
        if operation:
            self.during(operation)

    def during(self, operation: str) -> ProviderError:
        """Name the upstream operation that failed (the innermost one named wins)."""
        if not self.operation:
            self.operation = operation
            self.details["operation"] = operation
        return self


class ProviderTimeout(ProviderError):
    code = "provider_timeout"
