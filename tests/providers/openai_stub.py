"""A real HTTP server on 127.0.0.1 speaking the OpenAI wire format, for tests.

Endpoints (with or without a ``/v1`` prefix): ``POST /chat/completions``
(whole, or SSE with ``stream: true``: content deltas, tool-call fragments,
a finish chunk, a usage chunk when ``stream_options.include_usage``, then
``data: [DONE]``), ``POST /moderations``, ``POST /embeddings``, and the
Images API: ``POST /images/generations`` (JSON) and ``POST /images/edits``
(multipart: ``image``, ``prompt``, ``model``), answering ``b64_json`` PNGs
drawn by the local provider (the recorded body of an edit is its form
fields, the image as its byte count).

Answers come from the deterministic `LocalProvider` by default, so a stack
pointed at the stub behaves like the local provider. The chat task is
guessed from the request (JSON mode + soul JSON in the last user message →
"voice", JSON mode + "audit"/"score" in the system prompt → "audit", other
JSON mode → "soul", else "reply"); set ``stub.responder = fn(body) ->
Completion`` to script replies instead.

Fault injection for the next N matching requests (``path`` filters by
suffix, e.g. "/embeddings"; faults are consumed first come, first served):

* ``inject_error(times, status=500, envelope=None, headers=None)`` – an
  OpenAI-style error envelope (``{"error": {"message", "type", "param",
  "code"}}``) or a raw body when ``envelope`` is a string, with extra response
  ``headers`` (e.g. ``{"Retry-After": "3"}``);
* ``inject_malformed(times, body="{not json")`` – 200 with a broken body;
* ``inject_delay(times, seconds)`` – sleep before answering (for timeouts);
  ``mid_stream=True`` sleeps after the chunk ending the first sentence instead;
* ``inject_truncated_stream(times)`` – a stream that ends without ``[DONE]``;
* ``inject_cut(times)`` – the connection closed half-way through the answer
  (a stream after its first chunks, a whole answer after part of its body:
  "peer closed connection").

``stub.requests`` records every request (method, path, headers, JSON body).
With ``api_key`` set, requests without ``Authorization: Bearer <key>`` get 401.

``OpenAIStub(models=[...])`` lists those model ids on ``GET /models`` (as every
OpenAI-compatible server does; the key is checked as for the rest); without
``models``, ``GET`` answers 404 (a server that lists none).

``OpenAIStub(chat_only=True)`` is a plain local model server as Ollama, vLLM
and llama.cpp's server are: ``/chat/completions`` (whole and streamed) and
nothing else, every other path a ``404 page not found`` in plain text.

Use from any test: the ``openai_stub`` fixture (function scope, state reset
between tests, one server per session) – import ``openai_stub_server`` and
``openai_stub`` from ``providers.openai_stub`` into a conftest.py – or
``with OpenAIStub() as stub: ...``. Run standalone with
``python tests/providers/openai_stub.py --port 8089``.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from persona_service.kernel.models import Completion, GenerationOptions, ImagePrompt, Message, ToolCall
from persona_service.providers.local import LocalProvider, count_tokens

DEFAULT_ERROR = {"message": "The server had an error while processing your request.", "type": "server_error",
                 "param": None, "code": "internal_error"}


@dataclass
class StubRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int = 0  # the client's source port: equal ports mean a reused (keep-alive) connection


@dataclass
class Fault:
    kind: str  # error | malformed | delay | hold | truncated | cut | events
    remaining: int
    path: str | None = None
    status: int = 500
    body: Any = None
    seconds: float = 0.0
    mid_stream: bool = False
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _State:
    faults: list[Fault] = field(default_factory=list)
    requests: list[StubRequest] = field(default_factory=list)


def guess_task(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if (body.get("response_format") or {}).get("type") != "json_object":
        return "reply"
    system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system").lower()
    last_user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    if "audit" in system or "score" in system:
        return "audit"
    if '"desire"' in last_user and not last_user.strip().lower().startswith("refine:"):
        return "voice"
    return "soul"


def wire_to_messages(body: dict[str, Any]) -> list[Message]:
    out = []
    for m in body.get("messages") or []:
        calls = tuple(ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
                      for c in m.get("tool_calls") or ())
        content = m.get("content")
        if isinstance(content, list):  # content parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(Message(m.get("role", "user"), content or "", m.get("name") or "", m.get("tool_call_id") or "",
                           calls))
    return out


def local_responder(body: dict[str, Any]) -> Completion:
    options = GenerationOptions(
        temperature=body.get("temperature"),
        max_tokens=body.get("max_tokens"),
        response_format="json" if (body.get("response_format") or {}).get("type") == "json_object" else "text",
        tools=tuple(body.get("tools") or ()),
        tool_choice=body.get("tool_choice"),
        task=guess_task(body),
        model=body.get("model") or "",
    )
    return LocalProvider().generate(wire_to_messages(body), options)


class OpenAIStub:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None, chat_only: bool = False,
                 models: list[str] | None = None):
        self.api_key = api_key
        self.chat_only = chat_only
        self.models = models
        self.responder: Callable[[dict[str, Any]], Completion] = local_responder
        self.latency = 0.0  # seconds every chat completion takes before it answers (a model that thinks)
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping = threading.Event()
        self._released = threading.Event()  # what held requests wait for (inject_hold, release)
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What to configure as PERSONA_OPENAI_BASE_URL."""
        return self.url + "/v1"

    def stack_env(self, **extra: str) -> dict[str, str]:
        """The settings of a stack whose model provider is this stub (for make_stack): chat, and moderation
        and embeddings too unless the stub is chat-only (then they stay local, the default)."""
        parts = {} if self.chat_only else {"PERSONA_MODERATION_PROVIDER": "openai",
                                           "PERSONA_EMBEDDING_PROVIDER": "openai"}
        return {"PERSONA_PROVIDER": "openai", "PERSONA_OPENAI_BASE_URL": self.base_url, **parts, **extra}

    def start(self) -> OpenAIStub:
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-stub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- controls ----------------------------------------------------------

    def reset(self) -> None:
        self.release()
        with self._lock:
            self._state = _State()
            self._released = threading.Event()
        self.responder = local_responder
        self.api_key = None

    @property
    def requests(self) -> list[StubRequest]:
        with self._lock:
            return list(self._state.requests)

    def requests_to(self, suffix: str) -> list[StubRequest]:
        return [r for r in self.requests if r.path.endswith(suffix)]

    def _add(self, fault: Fault) -> None:
        with self._lock:
            self._state.faults.append(fault)

    def inject_error(self, times: int = 1, status: int = 500, envelope: dict[str, Any] | str | None = None,
                     path: str | None = None, headers: dict[str, str] | None = None) -> None:
        body = envelope if envelope is not None else {"error": dict(DEFAULT_ERROR)}
        self._add(Fault("error", times, path, status=status, body=body, headers=dict(headers or {})))

    def inject_cut(self, times: int = 1, path: str | None = None) -> None:
        self._add(Fault("cut", times, path))

    def inject_malformed(self, times: int = 1, body: str = "{not json", path: str | None = None) -> None:
        self._add(Fault("malformed", times, path, status=200, body=body))

    def inject_delay(self, times: int = 1, seconds: float = 2.0, path: str | None = None,
                     mid_stream: bool = False) -> None:
        self._add(Fault("delay", times, path, seconds=seconds, mid_stream=mid_stream))

    def inject_hold(self, times: int = 1, path: str | None = None) -> None:
        """The next `times` requests (to `path`) are recorded, then wait for `release()` before they are
        answered: a test sees how many are in flight at once without timing anything."""
        self._add(Fault("hold", times, path))

    def release(self) -> None:
        self._released.set()

    def inject_truncated_stream(self, times: int = 1, path: str | None = None) -> None:
        self._add(Fault("truncated", times, path))

    def inject_events(self, lines: list[str], times: int = 1, path: str | None = None) -> None:
        """A stream of exactly these lines (`data: ...`, comments, other fields) instead of the answer."""
        self._add(Fault("events", times, path, body=list(lines)))

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self._state.faults:
                if fault.remaining > 0 and (fault.path is None or path.endswith(fault.path)):
                    fault.remaining -= 1
                    return fault
        return None

    def _record(self, request: StubRequest) -> None:
        with self._lock:
            self._state.requests.append(request)

    # -- HTTP --------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                try:
                    stub._handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                stub._record(StubRequest("GET", path, {k.lower(): v for k, v in self.headers.items()}, None,
                                         self.client_address[1]))
                if stub.models is None or not path.endswith("/models"):
                    return stub._send_json(self, 404, {"error": {"message": "Not found", "type": "invalid_request_error",
                                                                 "param": None, "code": "not_found"}})
                if stub.api_key is not None and self.headers.get("Authorization") != f"Bearer {stub.api_key}":
                    return stub._send_json(self, 401, {"error": {"message": "Incorrect API key provided.",
                                                                 "type": "invalid_request_error", "param": None,
                                                                 "code": "invalid_api_key"}})
                stub._send_json(self, 200, {"object": "list", "data": [
                    {"id": model, "object": "model", "created": 0, "owned_by": "stub"} for model in stub.models]})

        return Handler

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        content_type = h.headers.get("Content-Type") or ""
        try:
            body = _form(content_type, raw) if content_type.startswith("multipart/") else (
                json.loads(raw) if raw else None)
        except ValueError:
            body = None
        path = h.path.split("?")[0]
        self._record(StubRequest("POST", path, {k.lower(): v for k, v in h.headers.items()}, body,
                                 h.client_address[1]))
        fault = self._take_fault(path)
        if fault and fault.kind == "delay" and not fault.mid_stream:
            self._stopping.wait(fault.seconds)
        if fault and fault.kind == "hold":
            self._released.wait(60)
        if fault and fault.kind == "error":
            if isinstance(fault.body, str):
                return self._send(h, fault.status, fault.body.encode(), "text/plain", fault.headers)
            return self._send(h, fault.status, json.dumps(fault.body).encode(), "application/json", fault.headers)
        if fault and fault.kind == "cut" and not (isinstance(body, dict) and body.get("stream")):
            return self._cut(h, json.dumps(chat_completion_json(body, self.responder(body))).encode()
                             if isinstance(body, dict) and path.endswith("/chat/completions") else b'{"data": []}')
        if fault and fault.kind == "malformed":
            return self._send(h, 200, str(fault.body).encode(), "application/json")
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send_json(h, 401, {"error": {"message": "Incorrect API key provided.",
                                                      "type": "invalid_request_error", "param": None,
                                                      "code": "invalid_api_key"}})
        if self.chat_only and not path.endswith("/chat/completions"):
            return self._send(h, 404, b"404 page not found", "text/plain; charset=utf-8")
        if not isinstance(body, dict):
            return self._send_json(h, 400, {"error": {"message": "We could not parse the JSON body of your request.",
                                                      "type": "invalid_request_error", "param": None, "code": None}})
        if path.endswith("/chat/completions"):
            if self.latency:
                self._stopping.wait(self.latency)
            completion = self.responder(body)
            if body.get("stream"):
                return self._stream(h, body, completion, fault)
            return self._send_json(h, 200, chat_completion_json(body, completion))
        if path.endswith("/moderations"):
            return self._send_json(h, 200, moderation_json(body))
        if path.endswith("/embeddings"):
            return self._send_json(h, 200, embeddings_json(body))
        if path.endswith("/images/generations"):
            png = LocalProvider().generate_image(ImagePrompt(subject=str(body.get("prompt")), prompt=str(body.get("prompt"))))
            return self._send_json(h, 200, {"created": int(time.time()), "data": [{"b64_json": base64.b64encode(png).decode()}]})
        if path.endswith("/images/edits") and isinstance(body.get("image"), bytes):
            png = LocalProvider().edit_image(body["image"], str(body.get("prompt")))
            return self._send_json(h, 200, {"created": int(time.time()), "data": [{"b64_json": base64.b64encode(png).decode()}]})
        return self._send_json(h, 404, {"error": {"message": f"Unknown path {path}", "type": "invalid_request_error",
                                                  "param": None, "code": "unknown_url"}})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(payload)

    @staticmethod
    def _cut(h: BaseHTTPRequestHandler, payload: bytes) -> None:
        """A whole answer announced, half of it sent, then the connection closed."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload[: len(payload) // 2])
        h.wfile.flush()
        h.close_connection = True
        _hang_up(h)

    def _send_json(self, h: BaseHTTPRequestHandler, status: int, value: Any) -> None:
        self._send(h, status, json.dumps(value).encode(), "application/json")

    def _stream(self, h: BaseHTTPRequestHandler, body: dict[str, Any], completion: Completion,
                fault: Fault | None) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def write(payload: bytes) -> None:
            h.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            h.wfile.flush()

        def send(data: str) -> None:
            write(f"data: {data}\n\n".encode())

        if fault and fault.kind == "events":
            for line in fault.body:
                write(f"{line}\n\n".encode())
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
            return
        chunks = stream_chunks(body, completion)
        paused = False
        for i, chunk in enumerate(chunks):
            send(json.dumps(chunk))
            text = "".join((c.get("delta") or {}).get("content") or "" for c in chunk.get("choices") or [])
            ends_sentence = any(mark in text for mark in ".!?\n") or i == len(chunks) - 2
            if not paused and ends_sentence and fault and fault.kind == "delay" and fault.mid_stream:
                paused = True  # after the first sentence (or before the last chunk)
                self._stopping.wait(fault.seconds)
            if fault and fault.kind == "truncated" and i == min(1, len(chunks) - 1):
                break
            if fault and fault.kind == "cut" and i == min(1, len(chunks) - 1):
                h.close_connection = True
                return _hang_up(h)  # no terminating chunk: the peer closed the connection
        else:
            send("[DONE]")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


def _hang_up(h: BaseHTTPRequestHandler) -> None:
    import socket

    try:
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# -- wire format ------------------------------------------------------------

def _form(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body: text fields as str, files as bytes."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        fields[str(name)] = data if part.get_filename() else data.decode()
    return fields


def _wire_calls(calls: tuple[ToolCall, ...]) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]


def _usage(completion: Completion) -> dict[str, int]:
    return {"prompt_tokens": completion.input_tokens, "completion_tokens": completion.output_tokens,
            "total_tokens": completion.input_tokens + completion.output_tokens}


def _id(body: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def chat_completion_json(body: dict[str, Any], completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or None, "refusal": None}
    if completion.tool_calls:
        message["tool_calls"] = _wire_calls(completion.tool_calls)
    return {
        "id": "chatcmpl-" + _id(body),
        "object": "chat.completion",
        "created": 1700000000,
        "model": completion.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": completion.finish_reason}],
        "usage": _usage(completion),
    }


def stream_chunks(body: dict[str, Any], completion: Completion) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-" + _id(body), "object": "chat.completion.chunk", "created": 1700000000,
            "model": completion.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in re.findall(r"\S+\s*|\s+", completion.text)]
    for index, call in enumerate(completion.tool_calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                             "function": {"name": call.name, "arguments": ""}}]}))
        for start in range(0, len(call.arguments), 10):
            chunks.append(chunk({"tool_calls": [{"index": index,
                                                 "function": {"arguments": call.arguments[start:start + 10]}}]}))
    chunks.append(chunk({}, completion.finish_reason))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _usage(completion)})
    return chunks


def moderation_json(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs or ""]
    results = []
    for text in inputs:
        result = LocalProvider().moderate(str(text))
        results.append({
            "flagged": result.flagged,
            "categories": {c: c in result.categories for c in result.scores},
            "category_scores": result.scores,
        })
    return {"id": "modr-" + _id(body), "model": body.get("model") or "omni-moderation-latest", "results": results}


def embeddings_json(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs or ""]
    provider = LocalProvider(embedding_dims=int(body.get("dimensions") or 256))
    vectors = provider.embed([str(t) for t in inputs])
    tokens = sum(count_tokens(str(t)) for t in inputs)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": body.get("model") or "text-embedding-3-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


# -- pytest fixtures -----------------------------------------------------------

@pytest.fixture(scope="session")
def openai_stub_server():
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture
def openai_stub(openai_stub_server: OpenAIStub):
    """The session's stub server with fresh state (no faults, no log, local responder)."""
    openai_stub_server.reset()
    yield openai_stub_server
    openai_stub_server.reset()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    stub = OpenAIStub(port=args.port, api_key=args.api_key).start()
    print(f"OpenAI stub listening on {stub.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stub.stop()
