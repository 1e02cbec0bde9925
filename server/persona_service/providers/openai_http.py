"""A provider for any OpenAI-compatible HTTP API (chat completions, whole and
streamed, moderations and embeddings), over one keep-alive httpx client.

Failures become `ProviderError` (502; 503 for a 429 or 503 upstream) or
`ProviderTimeout` (504), each with its reason (`kernel.model_failures`: the
status class, a timeout, a refused or closed connection, a cut stream, a
malformed answer), the upstream's `Retry-After` and a short redacted
upstream message for the caller's `details`. Their rendered message is
always the catalogue's generic one; what the upstream said in full goes to
`.upstream` (its JSON error envelope when it sent one, else ``{"status":
code, "body": <first 2000 chars>}``, or ``{"error": kind, "detail": ...}``
for transport failures) and `.upstream_status` (the HTTP status, None when
no response arrived), for the audit log only. Each names the operation that
failed (`chat.completions`, `moderations`, `embeddings`,
`images.generations`, `images.edits`) for the caller's `details`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import NotRequired, TypedDict

import httpx

from persona_service.kernel import model_failures as failures
from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    Message,
    ModelCall,
    ModerationResult,
    ProviderError,
    ProviderTimeout,
    ToolCall,
)

BODY_LIMIT = 2000
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
           "content_filter": "content_filter", None: "stop", "": "stop"}


class _Malformed(Exception):
    """The upstream answered 2xx with something that is not the wire format."""


class ChatBody(TypedDict):
    """A chat completion's request, as this provider sends it."""

    model: str
    messages: list[JSONObject]
    temperature: NotRequired[float]
    max_tokens: NotRequired[int]
    tools: NotRequired[list[JSONObject]]
    tool_choice: NotRequired[object]
    response_format: NotRequired[dict[str, str]]
    stream: NotRequired[bool]
    stream_options: NotRequired[dict[str, bool]]


class OpenAIHTTPProvider:
    """A `Model` over HTTP: its work is its server's, so a call's `ModelCall` (its CPU turn, its tag) is unused."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        model: str = "gpt-4o-mini",
        embedding_model: str = "text-embedding-3-small",
        moderation_model: str = "omni-moderation-latest",
        timeout_seconds: float = 30.0,
        image_model: str = "gpt-image-1",
        image_size: str = "1024x1024",
        image_timeout_seconds: float = 120.0,
        *,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.embedding_model = embedding_model
        self.moderation_model = moderation_model
        self.image_model = image_model
        self.image_size = image_size
        self.image_timeout = httpx.Timeout(image_timeout_seconds)
        self.timeout_seconds = timeout_seconds
        self._secrets = (api_key,) if api_key else ()
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_seconds),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32, keepalive_expiry=60.0),
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIHTTPProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ----------------------------------------------------------

    def chat_body(self, messages: list[Message], options: GenerationOptions, stream: bool = False) -> ChatBody:
        if options.continue_from:  # a trailing assistant message: what OpenAI-compatible servers continue
            messages = [*messages, Message("assistant", options.continue_from)]
        body = ChatBody(model=options.model or self.model, messages=[_wire_message(m) for m in messages])
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.max_tokens is not None:
            body["max_tokens"] = options.max_tokens
        if options.tools:
            body["tools"] = list(options.tools)
            if options.tool_choice is not None:
                body["tool_choice"] = options.tool_choice
        if options.response_format == "json":
            body["response_format"] = {"type": "json_object"}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion:
        body = self.chat_body(messages, options)
        with _during("chat.completions"):
            return self._completion(body, self._post("/chat/completions", body, prompt=_prompt(body)))

    def _completion(self, body: ChatBody, data: JSONObject) -> Completion:
        try:
            choice = _at(_at(data, "choices"), 0)
            message = _at(choice, "message")
            calls = tuple(
                ToolCall(_text(_at(c, "id")), _text(_at(_at(c, "function"), "name")),
                         _text(_get(_at(c, "function"), "arguments")))
                for c in _iterated(_get(message, "tool_calls") or ())
            )
            usage = data["usage"]
            return Completion(
                text=_text(_get(message, "content")),
                model=_text(data.get("model")) or body["model"],
                input_tokens=_int(_at(usage, "prompt_tokens")),
                output_tokens=_int(_at(usage, "completion_tokens")),
                finish_reason=_finish(_get(choice, "finish_reason"), calls),
                tool_calls=calls,
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]:
        with _during("chat.completions"):
            yield from self._stream(self.chat_body(messages, options, stream=True))

    def _stream(self, body: ChatBody) -> Iterator[Delta]:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish, model, done = "", body["model"], False
        usage: object = None
        try:
            with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self._status_error(response, _prompt(body))
                if "text/event-stream" not in response.headers.get("content-type", "text/event-stream"):
                    response.read()  # a whole JSON body where a stream was asked for
                    try:
                        data = response.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict) and "error" in data:
                        raise self._error_event(data, response.status_code, body, "error instead of stream")
                    raise self._malformed(response.status_code, response.text, "not an event stream")
                for line in response.iter_lines():
                    line = line.strip()
                    if not line or line.startswith(":") or not line.startswith("data:"):
                        continue  # blank separators, SSE comments, event:/id: fields
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        raise self._malformed(response.status_code, payload, "stream chunk is not JSON") from None
                    if not isinstance(chunk, dict):
                        raise self._malformed(response.status_code, payload, "stream chunk is not an object")
                    if "error" in chunk:
                        raise self._error_event(chunk, response.status_code, body, "error event in stream")
                    try:
                        model = _text(chunk.get("model")) or model
                        if chunk.get("usage"):
                            usage = chunk["usage"]
                        for delta in self._chunk_deltas(chunk, text, calls):
                            if delta.finish_reason:
                                finish = delta.finish_reason
                            else:
                                yield delta
                    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
                        raise self._malformed(response.status_code, payload, f"bad stream chunk: {exc!r}") from None
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        if not done:
            raise ProviderError(self.name, "stream ended before [DONE]", {"error": "truncated_stream"}, 200,
                                kind="stream_cut", upstream_message="the stream ended before data: [DONE]")
        tool_calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items()))
        try:
            if usage is None:
                raise KeyError("usage")
            completion = Completion(
                text="".join(text),
                model=model,
                input_tokens=_int(_at(usage, "prompt_tokens")),
                output_tokens=_int(_at(usage, "completion_tokens")),
                finish_reason=_finish(finish or None, tool_calls),
                tool_calls=tool_calls,
            )
        except (KeyError, TypeError, ValueError):
            raise self._malformed(200, {"usage": usage}, "stream carried no usage") from None
        yield Delta(finish_reason=completion.finish_reason, usage=completion)

    @staticmethod
    def _chunk_deltas(chunk: JSONObject, text: list[str], calls: dict[int, dict[str, str]]) -> Iterator[Delta]:
        for choice in _iterated(chunk.get("choices") or ()):
            if _get(choice, "index", 0) != 0:
                continue
            delta = _get(choice, "delta") or {}
            content = _text(_get(delta, "content"))
            if content:
                text.append(content)
                yield Delta(text=content)
            for fragment in _iterated(_get(delta, "tool_calls") or ()):
                index = _int(_get(fragment, "index", 0))
                function = _get(fragment, "function") or {}
                call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                piece = ToolCall(_text(_get(fragment, "id")), _text(_get(function, "name")),
                                 _text(_get(function, "arguments")))
                call["id"] = call["id"] or piece.id
                call["name"] = call["name"] or piece.name
                call["arguments"] += piece.arguments
                yield Delta(tool_call=piece, tool_call_index=index)
            if _get(choice, "finish_reason"):
                yield Delta(finish_reason=_finish(_text(_at(choice, "finish_reason")), ()))

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        with _during("moderations"):
            data = self._post("/moderations", {"model": self.moderation_model, "input": text}, prompt=text)
            return self._moderation(data)

    def _moderation(self, data: JSONObject) -> ModerationResult:
        try:
            result = _at(_at(data, "results"), 0)
            categories = _get(result, "categories") or {}
            scores = _get(result, "category_scores") or {}
            return ModerationResult(  # (each value of its type: a flag read from "no" would be True)
                flagged=_bool(_at(result, "flagged")),
                categories=tuple(name for name, hit in _members(categories) if _bool(hit)),
                scores={str(k): float(_number(v)) for k, v in _members(scores)},
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None

    @property
    def embedding_identity(self) -> str:
        """What its vectors depend on beside the text: the embedding model and the server that runs it
        (kernel.models.embedding_identity; in the process's memory only, never logged)."""
        return f"openai/{self.base_url}/{self.embedding_model}"

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]:
        if not texts:
            return []
        with _during("embeddings"):
            data = self._post("/embeddings", {"model": self.embedding_model, "input": list(texts)},
                              prompt="\n".join(texts))
            return self._vectors(data, len(texts))

    def _vectors(self, data: JSONObject, inputs: int) -> list[list[float]]:
        try:
            items = sorted(_iterated(data["data"]), key=lambda item: _int(_get(item, "index", 0)))
            vectors = [[float(_number(x)) for x in _iterated(_at(item, "embedding"))] for item in items]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None
        if len(vectors) != inputs:
            raise self._malformed(200, data, f"{len(vectors)} embeddings for {inputs} inputs")
        return vectors

    # -- images (Images API: GPT image models answer base64 PNGs) ----------

    def generate_image(self, prompt: ImagePrompt, *, call: ModelCall = NO_CALL) -> bytes:
        with _during("images.generations"):
            return self._image(self._post("/images/generations", {
                "model": self.image_model, "prompt": prompt.text(), "size": self.image_size, "n": 1,
            }, timeout=self.image_timeout))

    def edit_image(self, image: bytes, instruction: str, *, call: ModelCall = NO_CALL) -> bytes:
        with _during("images.edits"):
            return self._image(self._post("/images/edits", files={"image": ("portrait.png", image, "image/png")},
                                          form={"model": self.image_model, "prompt": instruction,
                                                "size": self.image_size, "n": "1"}, timeout=self.image_timeout))

    def _image(self, data: JSONObject) -> bytes:
        """The first image of an Images API answer: its `b64_json`, or the bytes behind its `url`."""
        try:
            item = _at(data["data"], 0)
            if _get(item, "b64_json"):
                png = _b64decoded(_at(item, "b64_json"))
            else:
                png = self._fetch(str(_at(item, "url")))
        except (KeyError, IndexError, TypeError, AttributeError, ValueError, binascii.Error) as exc:
            raise self._malformed(200, data, f"missing or invalid image: {exc!r}") from None
        if not png.startswith(b"\x89PNG\r\n\x1a\n"):
            raise self._malformed(200, {"bytes": len(png)}, "the image is not a PNG")
        return png

    def _fetch(self, url: str) -> bytes:
        response = self._send(lambda: self._client.get(url, timeout=self.image_timeout))
        return response.content

    # -- plumbing ----------------------------------------------------------

    def _post(self, path: str, body: Mapping[str, object] | None = None, *,
              files: dict[str, tuple[str, bytes, str]] | None = None, form: dict[str, str] | None = None,
              timeout: httpx.Timeout | None = None, prompt: str = "") -> JSONObject:
        # (httpx's own default, the client's timeout, stands when none is given.)
        wait = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        prompt = prompt or str((body or form or {}).get("prompt") or "")
        if files is not None:
            response = self._send(lambda: self._client.post(path, files=files, data=form, timeout=wait), prompt)
        else:
            response = self._send(lambda: self._client.post(path, json=body, timeout=wait), prompt)
        try:
            data = response.json()
        except ValueError:
            raise self._malformed(response.status_code, response.text, "response is not JSON") from None
        if not isinstance(data, dict):
            raise self._malformed(response.status_code, response.text, "response is not a JSON object")
        return data

    def _send(self, request: Callable[[], httpx.Response], prompt: str = "") -> httpx.Response:
        try:
            response = request()
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        if response.status_code >= 400:
            raise self._status_error(response, prompt)
        return response

    def _status_error(self, response: httpx.Response, prompt: str = "") -> ProviderError:
        status = response.status_code
        try:
            envelope = response.json()
        except ValueError:
            envelope = None
        said = failures.shown(failures.upstream_message(envelope, response.text), self._secrets, prompt)
        if not (isinstance(envelope, dict) and "error" in envelope):
            envelope = {"status": status, "body": response.text[:BODY_LIMIT]}
        kind = failures.from_status(status, said, envelope)
        error_class = ProviderTimeout if kind == "timeout" else ProviderError
        return error_class(self.name, f"upstream HTTP {status}", envelope, status, kind=kind, upstream_message=said,
                           retry_after=failures.retry_after(response.headers))

    def _error_event(self, data: JSONObject, status: int, body: ChatBody, what: str) -> ProviderError:
        said = failures.shown(failures.upstream_message(data), self._secrets, _prompt(body))
        kind = failures.from_status(status, said, data) if status >= 400 else "upstream_error_event"
        if kind == "upstream_error_event" and failures.from_status(400, said, data) == "model_not_found":
            kind = "model_not_found"
        return ProviderError(self.name, what, data, status, kind=kind, upstream_message=said)

    def _transport_error(self, exc: httpx.HTTPError) -> ProviderError:
        """A failure with no (complete) answer: timed out, refused, unreachable or closed midway."""
        detail = {"error": "connection_error", "detail": _detail(exc)}
        if isinstance(exc, httpx.TimeoutException):
            what = "connect" if isinstance(exc, httpx.ConnectTimeout) else "answer"
            return ProviderTimeout(self.name, "timed out", {"error": "timeout", "detail": _detail(exc)},
                                   upstream_message=f"no {what} within {self.timeout_seconds:g}s")
        text = str(exc).lower()
        if isinstance(exc, httpx.ConnectError):
            refused = "refused" in text or "errno 111" in text or "errno 61" in text
            return ProviderError(self.name, "transport error", detail,
                                 kind="connection_refused" if refused else "connection_failed",
                                 upstream_message="connection refused" if refused else "could not connect")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.CloseError)):
            return ProviderError(self.name, "transport error", detail, kind="connection_closed",
                                 upstream_message="peer closed connection without sending a complete answer")
        return ProviderError(self.name, "transport error", detail, kind="connection_failed",
                             upstream_message=type(exc).__name__)

    def _malformed(self, status: int, body: object, reason: str) -> ProviderError:
        text = body if isinstance(body, str) else json.dumps(body, default=str)
        return ProviderError(self.name, f"malformed upstream response: {reason}",
                             {"status": status, "body": text[:BODY_LIMIT]}, status, kind="malformed_response",
                             upstream_message=reason)


@contextmanager
def _during(operation: str) -> Iterator[None]:
    """Name the upstream operation in the errors raised inside."""
    try:
        yield
    except ProviderError as error:
        error.during(operation)
        raise


def _wire_message(message: Message) -> JSONObject:
    wire: JSONObject = {"role": message.role, "content": message.content}
    if message.name:
        wire["name"] = message.name
    if message.role == "tool" and message.tool_call_id:
        wire["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return wire


def _finish(reason: object, calls: tuple[ToolCall, ...]) -> str:
    if reason is None and calls:
        return "tool_calls"
    said = _text(reason)
    return _FINISH.get(said, said)


def _int(value: object) -> int:
    return int(_number(value))


# What the wire says is read as its type or not at all (a ValueError: `malformed_response`), never converted:
# str(7) as a reply's text, bool("no") as a moderation flag, float(True) as a score would pass garbage on.
def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return value


def _text(value: object) -> str:
    """A string field (absent or null: "")."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"not a string: {value!r}")
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"not a boolean: {value!r}")
    return value


def _prompt(body: ChatBody) -> str:
    """The text a chat request sends (an upstream message quoting it is withheld from callers)."""
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or () if isinstance(m, dict))


# The answer's JSON read as `x[key]`, `x.get(key)`, `x.items()` and a `for` over it read it before they were typed:
# a value of another JSON type fails with the exception (and words) that read raised, a `malformed_response`.
def _at(value: object, key: str | int) -> object:
    """`value[key]`: an object's member, an array's item (a string's character)."""
    if isinstance(value, dict):
        return value[key]
    if isinstance(value, (list, str)) and isinstance(key, int):
        return value[key]
    if isinstance(value, list):
        raise TypeError("list indices must be integers or slices, not str")
    if isinstance(value, str):
        raise TypeError("string indices must be integers, not 'str'")
    raise TypeError(f"'{type(value).__name__}' object is not subscriptable")


def _get(value: object, key: str, default: object = None) -> object:
    """`value.get(key, default)` of an object."""
    if not isinstance(value, dict):
        raise AttributeError(f"'{type(value).__name__}' object has no attribute 'get'")
    return value.get(key, default)


def _members(value: object) -> list[tuple[str, object]]:
    """`value.items()` of an object."""
    if not isinstance(value, dict):
        raise AttributeError(f"'{type(value).__name__}' object has no attribute 'items'")
    return list(value.items())


def _iterated(value: object) -> list[object]:
    """What a `for` over `value` goes through: an array's items, an object's keys, a string's characters."""
    if not isinstance(value, (list, tuple, dict, str)):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return list(value)


def _b64decoded(value: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"argument should be a bytes-like object or ASCII string, not '{type(value).__name__}'")
    return base64.b64decode(value, validate=True)


def _detail(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:BODY_LIMIT]
