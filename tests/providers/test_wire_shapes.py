"""Each place of each answer the OpenAI-compatible provider reads (a chat completion, a stream's chunks, a
moderation, embeddings), replaced by each JSON type, from a real HTTP server (`openai_stub`): the provider
returns what it read with every field of its declared type, or raises `ProviderError` `malformed_response`
(the failure's class: kernel.model_failures); never another exception, never a value of another type passed on
to the service. An oracle over answers nobody listed (tests/json_shapes.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, get_type_hints

import pytest
from json_shapes import as_text, shaped, strings
from persona_service.kernel.models import (
    Completion,
    GenerationOptions,
    Message,
    ModerationResult,
    ProviderError,
    ToolCall,
)
from persona_service.providers.openai_http import OpenAIHTTPProvider

MESSAGES = [Message("system", "You are Mara."), Message("user", "Hello?")]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}
COMPLETION = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
              "choices": [{"index": 0, "finish_reason": "tool_calls",
                           "message": {"role": "assistant", "content": "Rain.", "tool_calls": [CALL]}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
CHUNKS = [
    {"id": "c", "object": "chat.completion.chunk", "model": "gpt-test",
     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Ra"}, "finish_reason": None}]},
    {"id": "c", "object": "chat.completion.chunk", "model": "gpt-test",
     "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **CALL}]}, "finish_reason": None}]},
    {"id": "c", "object": "chat.completion.chunk", "model": "gpt-test",
     "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"id": "c", "object": "chat.completion.chunk", "model": "gpt-test", "choices": [],
     "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
]
MODERATION = {"id": "modr-1", "model": "omni-moderation-latest",
              "results": [{"flagged": True, "categories": {"hate": True, "violence": False},
                           "category_scores": {"hate": 0.9, "violence": 0.01}}]}
EMBEDDINGS = {"object": "list", "model": "embed-test", "usage": {"prompt_tokens": 2, "total_tokens": 2},
              "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]}]}


@pytest.fixture(scope="module")
def provider(openai_stub_server):
    with OpenAIHTTPProvider(openai_stub_server.base_url, "sk-test-123", "gpt-test", "embed-test", "moderate-test",
                            timeout_seconds=5) as p:
        yield p


def _typed(value: Any, hint: Any) -> bool:
    """Whether `value` is of the type `hint` declares (the records' own: str, int, bool, float, tuples, dicts)."""
    origin = getattr(hint, "__origin__", None)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, hint) and all(
            _typed(getattr(value, f.name), t) for f, t in zip(dataclasses.fields(hint),
                                                              get_type_hints(hint).values(), strict=True))
    if origin is tuple:
        return isinstance(value, tuple) and all(_typed(v, hint.__args__[0]) for v in value)
    if origin is list:
        return isinstance(value, list) and all(_typed(v, hint.__args__[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_typed(k, hint.__args__[0]) and _typed(v, hint.__args__[1])
                                               for k, v in value.items())
    if hint is float:
        return isinstance(value, float)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _judge(read: Callable[[], Any], hint: Any, what: str, value: Any) -> str | None:
    try:
        got = read()
    except ProviderError as exc:
        return None if exc.kind == "malformed_response" else f"{what}: ProviderError {exc.kind}"
    except Exception as exc:  # noqa: BLE001 - any other exception is what the oracle finds
        return f"{what}: {type(exc).__name__}: {exc}"
    if not _typed(got, hint):
        return f"{what}: passed on {got!r}"
    if as_text(value) & set(strings(got)):
        return f"{what}: turned into text in {got!r}"
    return None


def _each(stub: Any, answer: Any, read: Callable[[], Any], hint: Any, send: Callable[[Any], None]) -> list[str]:
    wrong = []
    for what, value, changed in shaped(answer):
        stub.reset()
        send(changed)
        if (found := _judge(read, hint, what, value)) is not None:
            wrong.append(found)
    return wrong


def _as_body(stub: Any, path: str) -> Callable[[Any], None]:
    return lambda answer: stub.inject_malformed(body=json.dumps(answer), path=path)


def _streamed(provider: OpenAIHTTPProvider) -> Completion:
    deltas = list(provider.stream(MESSAGES, GenerationOptions()))
    assert all(_typed(d.text, str) and _typed(d.tool_call, ToolCall | None) for d in deltas if d.usage is None)
    usage = deltas[-1].usage
    assert usage is not None
    return usage


def test_a_chat_completion_of_any_shape(provider, openai_stub):
    wrong = _each(openai_stub, COMPLETION, lambda: provider.generate(MESSAGES, GenerationOptions()),
                  Completion, _as_body(openai_stub, "/chat/completions"))
    assert not wrong, f"{len(wrong)} answers mishandled:\n" + "\n".join(wrong[:40])


@pytest.mark.parametrize("chunk", range(len(CHUNKS)))
def test_a_stream_chunk_of_any_shape(provider, openai_stub, chunk):
    def send(changed: Any) -> None:
        lines = [f"data: {json.dumps(changed if i == chunk else c)}" for i, c in enumerate(CHUNKS)]
        openai_stub.inject_events([*lines, "data: [DONE]"], path="/chat/completions")

    wrong = _each(openai_stub, CHUNKS[chunk], lambda: _streamed(provider), Completion, send)
    assert not wrong, f"{len(wrong)} chunks mishandled:\n" + "\n".join(wrong[:40])


def test_a_moderation_of_any_shape(provider, openai_stub):
    wrong = _each(openai_stub, MODERATION, lambda: provider.moderate("some text"), ModerationResult,
                  _as_body(openai_stub, "/moderations"))
    assert not wrong, f"{len(wrong)} answers mishandled:\n" + "\n".join(wrong[:40])


def test_embeddings_of_any_shape(provider, openai_stub):
    wrong = _each(openai_stub, EMBEDDINGS, lambda: provider.embed(["some text"]), list[list[float]],
                  _as_body(openai_stub, "/embeddings"))
    assert not wrong, f"{len(wrong)} answers mishandled:\n" + "\n".join(wrong[:40])
