"""Server-sent event streams (`text/event-stream`): persona generation, chat
replies and chat completions, sync and async.

A stream is a view onto a durable run on the server: every frame has `id:
<run id>.<seq>`, and sending the same request again with `Last-Event-ID`
replays the frames after it, then the live rest. So when the connection drops
mid-stream the SDK resumes it by itself, and the caller sees every event once.
There is one parser (SSEDecoder) and one description of what a frame means
(StreamBase); EventStream and AsyncEventStream only read and reconnect.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import httpx

from ._errors import APIConnectionError, PersonaError, StreamLostError, error_from_event
from ._models import BaseModel, parse
from .types import ChatCompletionChunk, ChatMessage, ChatMessageEvent, Persona, PipelineEvent

if TYPE_CHECKING:
    from ._core import AsyncCore, SyncCore


@dataclass(frozen=True)
class ServerSentEvent:
    """One frame: the last event id so far (`<run id>.<seq>`), its event name and data.
    `empty` is a frame of nothing but `id:` (it moves the resume point only)."""

    id: str
    event: str
    data: str
    empty: bool = False


_LINE_END = re.compile(r"\r\n|\r|\n")  # only these: U+2028 or NEL in a JSON string is data


class SSEDecoder:
    """The WHATWG event-stream rules, fed the body's bytes (UTF-8, one leading BOM dropped) or
    one line at a time: lines end at LF, CRLF or CR, `field: value` lines (one leading space
    dropped), `:` comments ignored, a blank line ends a frame, `id:` carries over to later
    frames (and is ignored when it holds NUL), `retry:` is the server's reconnection delay in ms.
    A frame is dispatched only at its blank line: one still open when the body ends, cleanly or
    not, is dropped, so its id never becomes the resume point. The same contract as the
    TypeScript SDK's readFrames, held to tests/sdk/sse_cases.json."""

    def __init__(self) -> None:
        self.last_event_id = ""
        self.retry_ms: int | None = None
        self._event = ""
        self._data: list[str] = []
        self._fields = False
        self._text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._line = ""  # the start of a line whose end has not arrived
        self._after_cr = False  # the text so far ended with CR: an LF next is the same line end

    def decode(self, chunk: bytes) -> list[ServerSentEvent]:
        """The frames a chunk of the body completes."""
        text = self._text.decode(chunk)
        if not text:
            return []
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = text.endswith("\r")
        lines = _LINE_END.split(text)
        lines[0] = self._line + lines[0]
        self._line = lines.pop()
        return [frame for line in lines if (frame := self.feed(line)) is not None]

    def feed(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_event_id = value
        else:  # `retry:` and unknown fields make no frame
            if name == "retry" and value.isascii() and value.isdigit():
                self.retry_ms = int(value)
            return None
        self._fields = True
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._fields:
            return None
        empty = not self._data and not self._event
        frame = ServerSentEvent(self.last_event_id, self._event or "message", "\n".join(self._data), empty)
        self._event, self._data, self._fields = "", [], False
        return frame

    def frames(self, chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
        for chunk in chunks:
            yield from self.decode(chunk)

    async def aframes(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
        async for chunk in chunks:
            for frame in self.decode(chunk):
                yield frame


E = TypeVar("E")
_S = TypeVar("_S", bound="EventStream[Any]")
_AS = TypeVar("_AS", bound="AsyncEventStream[Any]")
_END = object()


class StreamBase(Generic[E]):
    """What a stream's frames mean, for both kinds of stream: the `end` frame (or OpenAI's
    `[DONE]`) sets `status`; an `error` event is raised as the typed PersonaError of its code;
    every other frame's JSON is an event (a model of the stream's `event_model`)."""

    #: The model of the stream's events (None: plain dicts).
    event_model: ClassVar[type[BaseModel] | None] = None

    def __init__(self, client: SyncCore | AsyncCore, method: str, path: str, *, body: Any,
                 last_event_id: str | None = None, extra_headers: Mapping[str, str] | None = None) -> None:
        self._request = (method, path, body, extra_headers)
        #: The id of the last frame received: pass it as `last_event_id` to resume later.
        self.last_event_id = last_event_id
        #: `completed`, `failed` or `lost` once the `end` frame arrived.
        self.status: str | None = None
        #: How many times the stream was resumed after a drop.
        self.resumes = 0
        #: The run (response header `X-Run-Id`).
        self.run_id: str | None = last_event_id.rpartition(".")[0] if last_event_id else None
        self.response: httpx.Response | None = None
        self._failures = 0
        self._retry_ms: int | None = None
        self._resume_limit = client.stream_resumes
        self._backoff = client.backoff_base

    @property
    def request_id(self) -> str | None:
        return self.response.headers.get("x-request-id") if self.response is not None else None

    def _opened(self, response: httpx.Response) -> None:
        self.response = response
        self.run_id = response.headers.get("x-run-id") or self.run_id

    def _frame(self, frame: ServerSentEvent, decoder: SSEDecoder) -> Any:
        """The event of a frame, None for a frame that is none, or _END."""
        self._failures = 0
        self._retry_ms = decoder.retry_ms
        if frame.id:
            self.last_event_id = frame.id
        if frame.empty:
            return None
        if frame.event == "end" or frame.data == "[DONE]":  # ours; OpenAI's framing
            self._end(frame)
            return _END
        data = json.loads(frame.data)
        if frame.event == "error" or (frame.event == "message" and isinstance(data, dict) and set(data) == {"error"}):
            self.status = "failed"
            raise error_from_event(data.get("error"), self.response)
        event = parse(self.event_model, data) if self.event_model is not None else data
        self._observe(event)
        return event

    def _observe(self, event: Any) -> None:
        """Subclasses keep what they expose (the persona, the reply)."""

    def _end(self, frame: ServerSentEvent) -> None:
        payload = json.loads(frame.data) if frame.event == "end" and frame.data else {}
        self.status = str(payload.get("status", "completed"))
        if self.status == "lost":
            raise StreamLostError(f"Run {self.run_id} was lost: no server process could finish it; nothing of it "
                                  "was committed.",
                                  request_id=self.request_id, details=payload)
        if self.status != "completed":
            raise PersonaError(f"Run {self.run_id} ended with status {self.status}.", code="stream_failed",
                               request_id=self.request_id, details=payload)

    def _next_attempt(self, cause: BaseException | None) -> tuple[str, float]:
        """Where to resume from and how long to wait first; raises once resuming is hopeless."""
        resume_from = self.last_event_id or (f"{self.run_id}.0" if self.run_id else None)
        if resume_from is None or self._failures >= self._resume_limit:
            raise APIConnectionError(f"The stream of run {self.run_id} broke off and could not be resumed.") from cause
        # The first attempt at once (or after the server's `retry:`): a drop is usually a one-off.
        delay = self._backoff * float(2 ** (self._failures - 1)) if self._failures else 0.0
        delay = max(delay, (self._retry_ms or 0) / 1000)
        self._failures += 1
        return resume_from, delay

    def _missing(self, what: str) -> PersonaError:
        return PersonaError(f"The stream ended without {what}.", code="stream_failed", request_id=self.request_id)


class EventStream(StreamBase[E]):
    """The events of one streamed run, as an iterator (the final `end` frame is not yielded: it
    sets `status`). Opening sends the request at once, so errors before the first frame (422,
    429 …) are raised by the call that opened it, after the client's retry policy. A dropped
    connection is resumed with `Last-Event-ID`, up to the client's `stream_resumes` attempts in
    a row without a new frame. Use it as a context manager, or read it to the end."""

    def __init__(self, client: SyncCore, method: str, path: str, **options: Any) -> None:
        super().__init__(client, method, path, **options)
        self._client = client
        self._events = self._generate()

    def _open(self) -> None:
        method, path, body, extra_headers = self._request
        self._opened(self._client._open_stream(method, path, body, extra_headers, self.last_event_id))

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
        if self.response is not None:
            self.response.close()

    def until_done(self: _S) -> _S:
        """Reads the stream to its end."""
        for _ in self:
            pass
        return self

    def _generate(self) -> Generator[E, None, None]:
        try:
            while True:
                cause: Exception | None = None
                decoder = SSEDecoder()
                assert self.response is not None
                try:
                    for frame in decoder.frames(self.response.iter_bytes()):
                        event = self._frame(frame, decoder)
                        if event is _END:
                            return
                        if event is not None:
                            yield event
                except httpx.TransportError as exc:
                    cause = exc
                # The connection ended or broke before the `end` frame.
                self._resume(cause)
        finally:
            if self.response is not None:
                self.response.close()

    def _resume(self, cause: Exception | None) -> None:
        assert self.response is not None
        self.response.close()
        method, path, body, extra_headers = self._request
        while True:
            resume_from, delay = self._next_attempt(cause)
            if delay:
                time.sleep(delay)
            try:
                response = self._client._open_stream(method, path, body, extra_headers, resume_from)
            except APIConnectionError as exc:
                cause = exc
                continue
            self.resumes += 1
            self._opened(response)
            return


class AsyncEventStream(StreamBase[E]):
    """EventStream for AsyncPersonaClient: `async for event in stream`, `async with stream`."""

    def __init__(self, client: AsyncCore, method: str, path: str, **options: Any) -> None:
        super().__init__(client, method, path, **options)
        self._client = client
        self._events = self._generate()

    async def _open(self) -> None:
        method, path, body, extra_headers = self._request
        self._opened(await self._client._open_stream(method, path, body, extra_headers, self.last_event_id))

    def __aiter__(self) -> AsyncIterator[E]:
        return self

    async def __anext__(self) -> E:
        return await self._events.__anext__()

    async def __aenter__(self: _AS) -> _AS:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._events.aclose()
        if self.response is not None:
            await self.response.aclose()

    async def until_done(self: _AS) -> _AS:
        """Reads the stream to its end."""
        async for _ in self:
            pass
        return self

    async def _generate(self) -> AsyncGenerator[E, None]:
        try:
            while True:
                cause: Exception | None = None
                decoder = SSEDecoder()
                assert self.response is not None
                try:
                    async for frame in decoder.aframes(self.response.aiter_bytes()):
                        event = self._frame(frame, decoder)
                        if event is _END:
                            return
                        if event is not None:
                            yield event
                except httpx.TransportError as exc:
                    cause = exc
                await self._resume(cause)
        finally:
            if self.response is not None:
                await self.response.aclose()

    async def _resume(self, cause: Exception | None) -> None:
        assert self.response is not None
        await self.response.aclose()
        method, path, body, extra_headers = self._request
        while True:
            resume_from, delay = self._next_attempt(cause)
            if delay:
                await asyncio.sleep(delay)
            try:
                response = await self._client._open_stream(method, path, body, extra_headers, resume_from)
            except APIConnectionError as exc:
                cause = exc
                continue
            self.resumes += 1
            self._opened(response)
            return


# --- the streams of the API's operations ----------------------------------------------


class _PersonaState(StreamBase[PipelineEvent]):
    event_model = PipelineEvent
    #: The finished persona, once its event arrived.
    persona: Persona | None = None

    def _observe(self, event: Any) -> None:
        if event.event == "persona":
            self.persona = event.persona

    def _the_persona(self) -> Persona:
        if self.persona is None:
            raise self._missing("a persona")
        return self.persona


class PersonaStream(_PersonaState, EventStream[PipelineEvent]):
    """A persona generation: `run.started`, `step.started` / `step.completed` per step, then
    `persona`. `persona` is set once that event arrived; `get_persona()` reads to the end."""

    def get_persona(self) -> Persona:
        self.until_done()
        return self._the_persona()


class AsyncPersonaStream(_PersonaState, AsyncEventStream[PipelineEvent]):
    """PersonaStream for AsyncPersonaClient (`await stream.get_persona()`)."""

    async def get_persona(self) -> Persona:
        await self.until_done()
        return self._the_persona()


class _ChatState(StreamBase[ChatMessageEvent]):
    event_model = ChatMessageEvent
    #: The reply's text received so far.
    text: str = ""
    #: The `message.completed` event: the reply, the user message, the session.
    completed: ChatMessageEvent | None = None

    def _observe(self, event: Any) -> None:
        if event.event == "message.delta":
            self.text += event.delta
        elif event.event == "message.completed":
            self.completed = event

    @property
    def final_message(self) -> ChatMessage | None:
        """The stored reply (with `usage`: tokens and `cost_usd_micros`) once complete."""
        return self.completed.reply if self.completed is not None else None

    def _the_reply(self) -> ChatMessage:
        if self.final_message is None:
            raise self._missing("a reply")
        return self.final_message


class ChatStream(_ChatState, EventStream[ChatMessageEvent]):
    """A streamed chat reply: `message.started`, `message.delta` events, then `message.completed`.
    `text_deltas()` yields the reply's text as it comes; `get_final_message()` reads to the end."""

    def text_deltas(self) -> Iterator[str]:
        """The reply's text, piece by piece."""
        for event in self:
            if event.event == "message.delta":
                yield event.delta

    def get_final_message(self) -> ChatMessage:
        self.until_done()
        return self._the_reply()


class AsyncChatStream(_ChatState, AsyncEventStream[ChatMessageEvent]):
    """ChatStream for AsyncPersonaClient (`async for text in stream.text_deltas()`)."""

    async def text_deltas(self) -> AsyncIterator[str]:
        """The reply's text, piece by piece."""
        async for event in self:
            if event.event == "message.delta":
                yield event.delta

    async def get_final_message(self) -> ChatMessage:
        await self.until_done()
        return self._the_reply()


class CompletionStream(EventStream[ChatCompletionChunk]):
    """A streamed chat completion in OpenAI's framing: `chat.completion.chunk`s, then `[DONE]`."""

    event_model = ChatCompletionChunk


class AsyncCompletionStream(AsyncEventStream[ChatCompletionChunk]):
    """CompletionStream for AsyncPersonaClient."""

    event_model = ChatCompletionChunk
