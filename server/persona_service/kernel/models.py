"""The provider interface and its errors.

Implementations: `local.LocalProvider` (deterministic, no network, the
default) and `openai_http.OpenAIHTTPProvider` (any OpenAI-compatible HTTP
API). `retrying.Retrying` wraps either with the spec's backoff.

Each operation of a `Model` (what the process holds: the implementations and their wrappers) takes the
`ModelCall` it serves: whose organization's turn its CPU work takes, how the runners tag it, which attempt of
a durable run makes it. Nothing below the servicers reads who calls from ambient state; the kernel makes the
`ModelCall` from the servicer's call (process.capabilities.provider_for) and a `Retrying` bound to it is
the `Provider` a domain holds, whose operations take no call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from persona_service.kernel.errors import ApiError
from persona_service.kernel.json_values import JSONObject


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
    tools: tuple[JSONObject, ...] = ()  # OpenAI tool definitions, passed through
    # OpenAI's tool_choice as the caller sent it, any JSON value ("none", "auto", "required", {"type": "function",
    # "function": {"name": ...}}); None when absent.
    tool_choice: object = None
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


class CallTag(TypedDict):
    """A model call's `ModelCall` as it travels with the call (`ModelCall.tag`)."""

    org: str
    weight: int
    attempt: int


@dataclass(frozen=True)
class ModelCall:
    """What a model call is made for, handed with it: the calling organization and its plan's weight (the
    runners take calls in turns by them), the attempt of the durable run making it (1 for the first: a run
    taken over on another process makes its calls again with the next), and `turn`, a turn of the process's
    CPU gate for that organization (kernel.transport.fair), which the local model's CPU work takes a step at a
    time. `NO_CALL` outside any request (a durable task): nobody's turn, a first attempt."""

    org: str = ""
    weight: int = 1
    attempt: int = 1
    turn: Callable[[], AbstractContextManager[object]] = nullcontext

    def tag(self) -> CallTag:
        """What travels with a call queued for the runners (providers.remote); a runner's turn is its own."""
        return CallTag(org=self.org, weight=self.weight, attempt=self.attempt)


NO_CALL = ModelCall()


class ImageProvider(Protocol):
    """Draws and edits PNG portraits; each operation for the `ModelCall` it serves."""

    name: str

    def generate_image(self, prompt: ImagePrompt, *, call: ModelCall = NO_CALL) -> bytes: ...

    def edit_image(self, image: bytes, instruction: str, *, call: ModelCall = NO_CALL) -> bytes: ...


class Model(Protocol):
    """The configured model as the process holds it: each operation for the `ModelCall` it serves (its
    implementations and their wrappers: Composed, AttemptKeyed, RemoteProvider). Called without one, an
    operation serves nobody's call (`NO_CALL`): only tests and tools do that."""

    name: str

    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion: ...

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]: ...

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult: ...

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]: ...


class Provider(Protocol):
    """The model as one call uses it (a `Retrying` bound to the call's `ModelCall`): what a domain holds."""

    name: str

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion: ...

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]: ...

    def moderate(self, text: str) -> ModerationResult: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def embedding_identity(provider: Provider | Model) -> str | None:
    """What a provider's embeddings are a function of, beside the text (the model and where it runs), for caches of
    values derived from them; None where the provider does not say (nothing derived from its vectors is cached).
    Wrappers (Retrying, RemoteProvider, AttemptKeyed) pass the attribute through; `Composed` answers its
    embeddings part's."""
    identity = getattr(provider, "embedding_identity", None)
    return identity if isinstance(identity, str) and identity else None


class ProviderError(ApiError):
    """The upstream failed (an error status, a malformed reply, a refused or cut connection, a timeout).
    `upstream` holds its error envelope for the audit log; it is never rendered to callers.

    Every failure has a reason (`kernel.model_failures`: `upstream_auth`, `model_not_found`,
    `upstream_rate_limited`, `timeout`, `connection_refused`, `malformed_response`, ...), which decides
    whether it is retried and what the caller's `details` hold: `provider`, the upstream `operation` that
    failed (the OpenAI API's name for it: `chat.completions`, `moderations`, `embeddings`, ...),
    `reason`, `retryable`, `upstreamStatus` (the HTTP status, when an answer came), `upstreamMessage` (the
    upstream's own words on a 4xx, or ours on a failure without an answer, short and redacted: never a key, a
    URL or the prompt; a 5xx's words stay in the log line and the audit log) and `retryAfter` (seconds,
    when the upstream asked to wait). A failure not worth retrying is answered with `x-should-retry: false`;
    a 429 or 503 that outlasted the retries is answered as `503 service_unavailable` with `Retry-After`."""

    code = "provider_error"

    def __init__(self, provider: str, message: str = "", upstream: Mapping[str, object] | None = None,
                 status: int | None = None, operation: str = "", *, kind: str = "", upstream_message: str = "",
                 retry_after: float | None = None):
        from persona_service.kernel import model_failures as failures

        self.kind = kind or failures.from_status(status, upstream_message, upstream)
        if self.kind in ("upstream_rate_limited", "upstream_unavailable") and type(self) is ProviderError:
            self.code = "service_unavailable"  # answered once the retries are spent: come back after Retry-After
        super().__init__(None, {"provider": provider})
        self.provider = provider
        self.upstream = upstream or {}
        self.upstream_status = status
        self.reason = message
        self.upstream_message = upstream_message
        self.retry_after = retry_after
        self.retryable = failures.reason(self.kind).retryable
        self.operation = ""
        if status is not None:
            self.details["upstreamStatus"] = status
        self.details["reason"] = self.kind
        self.details["retryable"] = self.retryable
        if upstream_message and not (status is not None and status >= 500):
            # What a 5xx says is the upstream's inside (hosts, shards, traces): the log line and the audit log
            # keep it; a 4xx's words (a wrong key, a missing model) and our own labels are the caller's to see.
            self.details["upstreamMessage"] = upstream_message
        if not self.retryable:
            self.headers["x-should-retry"] = "false"
        if self.code == "service_unavailable":
            wait = retry_after if retry_after is not None else 1.0
            self.details["retryAfter"] = int(failures.header_seconds(wait))
            self.headers["retry-after"] = failures.header_seconds(wait)
        if operation:
            self.during(operation)

    def log_cause(self) -> str:
        """The failure in words, for the server's log line of the request (never a key or a prompt)."""
        from persona_service.kernel import model_failures as failures

        said = failures.reason(self.kind).says
        where = f" ({self.operation}" + (f", HTTP {self.upstream_status}" if self.upstream_status else "") + ")" \
            if self.operation else (f" (HTTP {self.upstream_status})" if self.upstream_status else "")
        quoted = f': "{self.upstream_message}"' if self.upstream_message else ""
        return f"{self.provider} {self.kind}{where}: {said}{quoted}"

    def during(self, operation: str) -> ProviderError:
        """Name the upstream operation that failed (the innermost one named wins)."""
        if not self.operation:
            self.operation = operation
            self.details["operation"] = operation
        return self


class ProviderTimeout(ProviderError):
    code = "provider_timeout"

    def __init__(self, provider: str, message: str = "", upstream: Mapping[str, object] | None = None,
                 status: int | None = None, operation: str = "", *, kind: str = "timeout", upstream_message: str = "",
                 retry_after: float | None = None):
        super().__init__(provider, message, upstream, status, operation, kind=kind,
                         upstream_message=upstream_message, retry_after=retry_after)
