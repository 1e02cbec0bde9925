"""A provider for any OpenAI-compatible HTTP API (chat completions, whole and
streamed, moderations and embeddings), over one keep-alive httpx client.

Failures become `ProviderError` (502) or `ProviderTimeout` (504). Their
rendered message is always the catalogue's generic one; what the upstream
said goes to `.upstream` (its JSON error envelope when it sent one, else
``{"status": code, "body": <first 2000 chars>}``, or ``{"error": kind,
"detail": ...}`` for transport failures) and `.upstream_status` (the HTTP
status, None when no response arrived), for the audit log only. Each names
the operation that failed (`chat.completions`, `moderations`, `embeddings`,
`images.generations`, `images.edits`) for the caller's `details`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from persona_service.providers.base import (
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    Message,
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


class OpenAIHTTPProvider:
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

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- requests ----------------------------------------------------------

    def chat_body(self, messages: list[Message], options: GenerationOptions, stream: bool = False) -> dict[str, Any]:
        if options.continue_from:  # a trailing assistant message: what OpenAI-compatible servers continue
            messages = [*messages, Message("assistant", options.continue_from)]
        body: dict[str, Any] = {"model": options.model or self.model, "messages": [_wire_message(m) for m in messages]}
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

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion:
        body = self.chat_body(messages, options)
        with _during("chat.completions"):
            return self._completion(body, self._post("/chat/completions", body))

    def _completion(self, body: dict[str, Any], data: dict[str, Any]) -> Completion:
        try:
            choice = data["choices"][0]
            message = choice["message"]
            calls = tuple(
                ToolCall(str(c["id"]), str(c["function"]["name"]), str(c["function"].get("arguments") or ""))
                for c in (message.get("tool_calls") or ())
            )
            usage = data["usage"]
            return Completion(
                text=message.get("content") or "",
                model=str(data.get("model") or body["model"]),
                input_tokens=_int(usage["prompt_tokens"]),
                output_tokens=_int(usage["completion_tokens"]),
                finish_reason=_finish(choice.get("finish_reason"), calls),
                tool_calls=calls,
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        with _during("chat.completions"):
            yield from self._stream(self.chat_body(messages, options, stream=True))

    def _stream(self, body: dict[str, Any]) -> Iterator[Delta]:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish, model, done = "", body["model"], False
        usage: dict[str, Any] | None = None
        try:
            with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self._status_error(response)
                if "text/event-stream" not in response.headers.get("content-type", "text/event-stream"):
                    response.read()  # a whole JSON body where a stream was asked for
                    try:
                        data = response.json()
                    except ValueError:
                        data = None
                    if isinstance(data, dict) and "error" in data:
                        raise ProviderError(self.name, "error instead of stream", data, response.status_code)
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
                        raise ProviderError(self.name, "error event in stream", chunk, response.status_code)
                    model = chunk.get("model") or model
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    try:
                        for delta in self._chunk_deltas(chunk, text, calls):
                            if delta.finish_reason:
                                finish = delta.finish_reason
                            else:
                                yield delta
                    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
                        raise self._malformed(response.status_code, payload, f"bad stream chunk: {exc!r}") from None
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(self.name, "timed out", {"error": "timeout", "detail": _detail(exc)}) from None
        except httpx.HTTPError as exc:
            raise ProviderError(self.name, "transport error", {"error": "connection_error", "detail": _detail(exc)}) \
                from None
        if not done:
            raise ProviderError(self.name, "stream ended before [DONE]", {"error": "truncated_stream"}, 200)
        tool_calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items()))
        try:
            if usage is None:
                raise KeyError("usage")
            completion = Completion(
                text="".join(text),
                model=str(model),
                input_tokens=_int(usage["prompt_tokens"]),
                output_tokens=_int(usage["completion_tokens"]),
                finish_reason=_finish(finish or None, tool_calls),
                tool_calls=tool_calls,
            )
        except (KeyError, TypeError, ValueError):
            raise self._malformed(200, {"usage": usage}, "stream carried no usage") from None
        yield Delta(finish_reason=completion.finish_reason, usage=completion)

    @staticmethod
    def _chunk_deltas(chunk: dict[str, Any], text: list[str], calls: dict[int, dict[str, str]]) -> Iterator[Delta]:
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                text.append(content)
                yield Delta(text=content)
            for fragment in delta.get("tool_calls") or ():
                index = int(fragment.get("index", 0))
                function = fragment.get("function") or {}
                call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                piece = ToolCall(str(fragment.get("id") or ""), str(function.get("name") or ""),
                                 str(function.get("arguments") or ""))
                call["id"] = call["id"] or piece.id
                call["name"] = call["name"] or piece.name
                call["arguments"] += piece.arguments
                yield Delta(tool_call=piece, tool_call_index=index)
            if choice.get("finish_reason"):
                yield Delta(finish_reason=_FINISH.get(choice["finish_reason"], str(choice["finish_reason"])))

    def moderate(self, text: str) -> ModerationResult:
        with _during("moderations"):
            data = self._post("/moderations", {"model": self.moderation_model, "input": text})
            return self._moderation(data)

    def _moderation(self, data: dict[str, Any]) -> ModerationResult:
        try:
            result = data["results"][0]
            categories = result.get("categories") or {}
            scores = result.get("category_scores") or {}
            return ModerationResult(
                flagged=bool(result["flagged"]),
                categories=tuple(name for name, hit in categories.items() if hit),
                scores={str(k): float(v) for k, v in scores.items()},
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with _during("embeddings"):
            data = self._post("/embeddings", {"model": self.embedding_model, "input": list(texts)})
            return self._vectors(data, len(texts))

    def _vectors(self, data: dict[str, Any], inputs: int) -> list[list[float]]:
        try:
            items = sorted(data["data"], key=lambda item: int(item.get("index", 0)))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise self._malformed(200, data, f"missing or invalid field: {exc!r}") from None
        if len(vectors) != inputs:
            raise self._malformed(200, data, f"{len(vectors)} embeddings for {inputs} inputs")
        return vectors

    # -- images (Images API: GPT image models answer base64 PNGs) ----------

    def generate_image(self, prompt: ImagePrompt) -> bytes:
        with _during("images.generations"):
            return self._image(self._post("/images/generations", {
                "model": self.image_model, "prompt": prompt.text(), "size": self.image_size, "n": 1,
            }, timeout=self.image_timeout))

    def edit_image(self, image: bytes, instruction: str) -> bytes:
        with _during("images.edits"):
            return self._image(self._post("/images/edits", files={"image": ("portrait.png", image, "image/png")},
                                          form={"model": self.image_model, "prompt": instruction,
                                                "size": self.image_size, "n": "1"}, timeout=self.image_timeout))

    def _image(self, data: dict[str, Any]) -> bytes:
        """The first image of an Images API answer: its `b64_json`, or the bytes behind its `url`."""
        try:
            item = data["data"][0]
            if item.get("b64_json"):
                png = base64.b64decode(item["b64_json"], validate=True)
            else:
                png = self._fetch(str(item["url"]))
        except (KeyError, IndexError, TypeError, AttributeError, ValueError, binascii.Error) as exc:
            raise self._malformed(200, data, f"missing or invalid image: {exc!r}") from None
        if not png.startswith(b"\x89PNG\r\n\x1a\n"):
            raise self._malformed(200, {"bytes": len(png)}, "the image is not a PNG")
        return png

    def _fetch(self, url: str) -> bytes:
        response = self._send(lambda: self._client.get(url, timeout=self.image_timeout))
        return response.content

    # -- plumbing ----------------------------------------------------------

    def _post(self, path: str, body: dict[str, Any] | None = None, *, files: dict[str, Any] | None = None,
              form: dict[str, str] | None = None, timeout: httpx.Timeout | None = None) -> Any:
        # (httpx's own default, the client's timeout, stands when none is given.)
        extra: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
        if files is not None:
            response = self._send(lambda: self._client.post(path, files=files, data=form, **extra))
        else:
            response = self._send(lambda: self._client.post(path, json=body, **extra))
        try:
            data = response.json()
        except ValueError:
            raise self._malformed(response.status_code, response.text, "response is not JSON") from None
        if not isinstance(data, dict):
            raise self._malformed(response.status_code, response.text, "response is not a JSON object")
        return data

    def _send(self, request: Callable[[], httpx.Response]) -> httpx.Response:
        try:
            response = request()
        except httpx.TimeoutException as exc:
            raise ProviderTimeout(self.name, "timed out", {"error": "timeout", "detail": _detail(exc)}) from None
        except httpx.HTTPError as exc:
            raise ProviderError(self.name, "transport error", {"error": "connection_error", "detail": _detail(exc)}) \
                from None
        if response.status_code >= 400:
            raise self._status_error(response)
        return response

    def _status_error(self, response: httpx.Response) -> ProviderError:
        status = response.status_code
        try:
            envelope = response.json()
        except ValueError:
            envelope = None
        if not (isinstance(envelope, dict) and "error" in envelope):
            envelope = {"status": status, "body": response.text[:BODY_LIMIT]}
        return ProviderError(self.name, f"upstream HTTP {status}", envelope, status)

    def _malformed(self, status: int, body: Any, reason: str) -> ProviderError:
        text = body if isinstance(body, str) else json.dumps(body, default=str)
        return ProviderError(self.name, f"malformed upstream response: {reason}",
                             {"status": status, "body": text[:BODY_LIMIT]}, status)


@contextmanager
def _during(operation: str) -> Iterator[None]:
    """Name the upstream operation in the errors raised inside."""
    try:
        yield
    except ProviderError as error:
        error.during(operation)
        raise


def _wire_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
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


def _finish(reason: Any, calls: tuple[ToolCall, ...]) -> str:
    if reason is None and calls:
        return "tool_calls"
    return _FINISH.get(reason, str(reason))


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return int(value)


def _detail(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:BODY_LIMIT]
