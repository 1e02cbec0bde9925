"""Server-sent event streams (`text/event-stream`): persona generation, chat
replies and chat completions.

A stream is a view onto a durable run on the server: every frame has `id:
<run id>.<seq>`, and sending the same request again with `Last-Event-ID`
replays the frames after it, then the live rest. So when the connection drops
mid-stream the SDK resumes it by itself, and the caller sees every event once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

import httpx

from ._errors import APIConnectionError, PersonaError, StreamLostError, error_from_event

if TYPE_CHECKING:
    from ._core import ClientCore
    from ._generated import ChatMessage, ChatSession, ErrorObject, Persona


class PipelineEvent(TypedDict, total=False):
    """One event of a persona generation stream (proto: persona.v1.PipelineEvent)."""

    # `run.started`, `step.started`, `step.completed`, `persona` or `error`.
    event: str
    # Generation run id.
    runId: str
    # Step name, for step events: `moderate_intent`, `draft_soul`, `write_voice`, `audit`, `fingerprint`.
    step: str
    # Step duration in milliseconds, for `step.completed`.
    durationMs: int
    # The finished persona, for `persona`.
    persona: Persona
    # The error, for `error` (the SDK raises it instead of yielding it).
    error: ErrorObject


class ChatMessageEvent(TypedDict, total=False):
    """One event of a streamed chat reply (proto: persona.v1.ChatMessageEvent)."""

    # `message.started`, `message.delta`, `message.completed` or `error`.
    event: str
    # A piece of the reply's text, for `message.delta`.
    delta: str
    # The stored user message, for `message.started` and `message.completed`.
    userMessage: ChatMessage
    # The stored reply with its `usage` (tokens, `costUsdMicros`), for `message.completed`.
    reply: ChatMessage
    # The session after the exchange, for `message.completed`.
    session: ChatSession
    # The error, for `error` (the SDK raises it instead of yielding it).
    error: ErrorObject


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched frame: its id (`<run id>.<seq>`), event name and data."""

    id: str
    event: str
    data: str


def iter_sse(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """Frames from a stream's lines, by the WHATWG rules: `field: value` lines,
    `:` comments, a blank line dispatches; the last id carries over."""
    event, last_id = "", ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data or event:
                yield ServerSentEvent(last_id, event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value


E = TypeVar("E")
_S = TypeVar("_S", bound="EventStream[Any]")


class EventStream(Generic[E]):
    """The events of one streamed run, as an iterator of their JSON data (the
    final `end` frame is not yielded: it sets `status`). An in-band `error`
    event is raised as the typed PersonaError of its code.

    Opening sends the request at once, so errors before the first frame (422,
    429 …) are raised by the call that opened it, after the client's retry
    policy. A dropped connection is resumed with `Last-Event-ID`, up to the
    client's `stream_resumes` attempts in a row without a new frame. Use it as
    a context manager, or iterate it to the end, to release the connection.
    """

    def __init__(
        self,
        client: ClientCore,
        method: str,
        path: str,
        *,
        body: Any,
        last_event_id: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client
        self._request = (method, path, body, extra_headers)
        #: The id of the last frame received: pass it as `last_event_id` to resume later.
        self.last_event_id = last_event_id
        #: `completed`, `failed` or `lost` once the `end` frame arrived.
        self.status: str | None = None
        #: How many times the stream was resumed after a drop.
        self.resumes = 0
        self._failures = 0
        self.response = client._open_stream(method, path, body, extra_headers, last_event_id)
        #: The run (response header `X-Run-Id`).
        self.run_id: str | None = self.response.headers.get("x-run-id") or (
            last_event_id.rpartition(".")[0] if last_event_id else None)
        self._events = self._generate()

    @property
    def request_id(self) -> str | None:
        return self.response.headers.get("x-request-id")

    def __iter__(self) -> Iterator[E]:
        return self

    def __next__(self) -> E:
        return next(self._events)

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._events.close()
        self.response.close()

    def until_done(self: _S) -> _S:
        """Reads the stream to its end."""
        for _ in self:
            pass
        return self

    def _observe(self, data: Any) -> None:
        """Subclasses keep what they expose (the persona, the reply)."""

    def _generate(self) -> Generator[E, None, None]:
        try:
            while True:
                cause: Exception | None = None
                try:
                    for frame in iter_sse(self.response.iter_lines()):
                        self._failures = 0
                        if frame.id:
                            self.last_event_id = frame.id
                        if frame.event == "end" or frame.data == "[DONE]":  # ours; OpenAI's framing
                            self._end(frame)
                            return
                        data = json.loads(frame.data)
                        if frame.event == "error" or (frame.event == "message" and isinstance(data, dict)
                                                      and set(data) == {"error"}):
                            self.status = "failed"
                            raise error_from_event(data.get("error"), self.response)
                        self._observe(data)
                        yield data
                except httpx.TransportError as exc:
                    cause = exc
                # The connection ended or broke before the `end` frame.
                self._resume(cause)
        finally:
            self.response.close()

    def _end(self, frame: ServerSentEvent) -> None:
        payload = json.loads(frame.data) if frame.event == "end" and frame.data else {}
        self.status = str(payload.get("status", "completed"))
        if self.status == "lost":
            raise StreamLostError(f"Run {self.run_id} was lost on the server; nothing of it was committed.",
                                  request_id=self.request_id, details=payload)
        if self.status != "completed":
            raise PersonaError(f"Run {self.run_id} ended with status {self.status}.", code="stream_failed",
                               request_id=self.request_id, details=payload)

    def _resume(self, cause: Exception | None) -> None:
        self.response.close()
        method, path, body, extra_headers = self._request
        while True:
            resume_from = self.last_event_id or (f"{self.run_id}.0" if self.run_id else None)
            if resume_from is None or self._failures >= self._client.stream_resumes:
                raise APIConnectionError(
                    f"The stream of run {self.run_id} broke off and could not be resumed.") from cause
            if self._failures:  # the first attempt at once: a drop is usually a one-off
                time.sleep(self._client.backoff_base * 2 ** (self._failures - 1))
            self._failures += 1
            try:
                self.response = self._client._open_stream(method, path, body, extra_headers, resume_from)
            except APIConnectionError as exc:
                cause = exc
                continue
            self.resumes += 1
            return


class PersonaStream(EventStream[PipelineEvent]):
    """A persona generation: `run.started`, `step.started` / `step.completed`
    per step, then `persona`. `persona` is set once that event arrived;
    `get_persona()` reads to the end and returns it."""

    persona: Persona | None = None

    def _observe(self, data: Any) -> None:
        if data.get("event") == "persona":
            self.persona = data.get("persona")

    def get_persona(self) -> Persona:
        self.until_done()
        if self.persona is None:
            raise PersonaError("The stream ended without a persona.", code="stream_failed", request_id=self.request_id)
        return self.persona


class ChatStream(EventStream[ChatMessageEvent]):
    """A streamed chat reply: `message.started`, `message.delta` events, then
    `message.completed`. `text_deltas()` yields the reply's text as it comes;
    `final_message` is the stored reply (with `usage`: tokens and
    `costUsdMicros`) once complete; `get_final_message()` reads to the end."""

    #: The reply's text received so far.
    text: str = ""
    #: The `message.completed` event: the reply, the user message, the session.
    completed: ChatMessageEvent | None = None

    def _observe(self, data: Any) -> None:
        if data.get("event") == "message.delta":
            self.text += data.get("delta", "")
        elif data.get("event") == "message.completed":
            self.completed = data

    def text_deltas(self) -> Iterator[str]:
        """The reply's text, piece by piece."""
        for event in self:
            if event.get("event") == "message.delta":
                yield event.get("delta", "")

    @property
    def final_message(self) -> ChatMessage | None:
        return self.completed.get("reply") if self.completed is not None else None

    def get_final_message(self) -> ChatMessage:
        self.until_done()
        if self.final_message is None:
            raise PersonaError("The stream ended without a reply.", code="stream_failed", request_id=self.request_id)
        return self.final_message
