"""The OpenAI-compatible HTTP provider against a real local HTTP server
(`openai_stub`): wire format, streaming, tool calls and error mapping."""

from __future__ import annotations

import json
import socket

import pytest
from persona_service.kernel.models import (
    Completion,
    GenerationOptions,
    Message,
    ProviderError,
    ProviderTimeout,
    ToolCall,
)
from persona_service.kernel.settings import InvalidSetting, read
from persona_service.providers.composed import Composed
from persona_service.providers.factory import make_base_provider, make_provider
from persona_service.providers.local import LocalProvider
from persona_service.providers.openai_http import OpenAIHTTPProvider
from persona_service.providers.retrying import Retrying
from persona_service.providers.settings import ProviderSettings

SYSTEM = ("You are Mara Quill.\nDesire: To keep the old harbour lighthouse burning for every lost sailor.\n"
          "Traits: gentle, stubborn, wry.\nSpeaking style: Short, plain sentences with a dry sense of humour.")
MESSAGES = [Message("system", SYSTEM), Message("user", "Why do you still climb the stairs every night?")]
WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather for a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                 "days": {"type": "integer"}},
                                "required": ["city"]}},
}
SECRET_DETAIL = "shard-7 exploded: internal stack trace"


@pytest.fixture(scope="module")
def provider(openai_stub_server):
    with OpenAIHTTPProvider(openai_stub_server.base_url, "sk-test-123", "gpt-test", "embed-test", "moderate-test",
                            timeout_seconds=5) as p:
        yield p


@pytest.fixture(scope="module")
def fast_timeout_provider(openai_stub_server):
    with OpenAIHTTPProvider(openai_stub_server.base_url, "sk-test-123", timeout_seconds=0.3) as p:
        yield p


# -- happy paths --------------------------------------------------------------

def test_generate_speaks_the_wire_format(provider, openai_stub):
    options = GenerationOptions(temperature=0.4, max_tokens=200)
    completion = provider.generate(MESSAGES, options)
    expected = LocalProvider().generate(MESSAGES, GenerationOptions(model="gpt-test"))
    assert completion == expected  # the stub answers with the local provider
    assert completion.model == "gpt-test"
    assert completion.input_tokens > 0 and completion.output_tokens > 0

    (request,) = openai_stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-123"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == [{"role": "system", "content": SYSTEM},
                                        {"role": "user", "content": MESSAGES[1].content}]
    assert request.body["temperature"] == 0.4 and request.body["max_tokens"] == 200
    assert "response_format" not in request.body and "tools" not in request.body and "stream" not in request.body


def test_json_mode_and_model_override(provider, openai_stub):
    completion = provider.generate([Message("user", "A cheerful baker who loves rye bread")],
                                   GenerationOptions(response_format="json", task="soul", model="gpt-other"))
    assert "rye bread" in json.loads(completion.text)["desire"]
    body = openai_stub.requests[-1].body
    assert body["response_format"] == {"type": "json_object"}
    assert body["model"] == "gpt-other" and completion.model == "gpt-other"
    assert "temperature" not in body and "max_tokens" not in body


def test_length_finish_reason(provider, openai_stub):
    completion = provider.generate(MESSAGES, GenerationOptions(max_tokens=5))
    assert completion.finish_reason == "length" and completion.output_tokens <= 5


def test_tool_call_round_trip(provider, openai_stub):
    options = GenerationOptions(tools=(WEATHER_TOOL,), tool_choice="auto")
    asked = [Message("system", SYSTEM), Message("user", "Is a storm coming? [[tool:get_weather]]")]
    completion = provider.generate(asked, options)
    assert completion.finish_reason == "tool_calls" and completion.text == ""
    (call,) = completion.tool_calls
    assert call.name == "get_weather" and call.id.startswith("call_")
    assert set(json.loads(call.arguments)) == {"city", "days"}
    body = openai_stub.requests[-1].body
    assert body["tools"] == [WEATHER_TOOL] and body["tool_choice"] == "auto"

    answered = asked + [Message("assistant", "", tool_calls=(call,)),
                        Message("tool", '{"forecast": "gale force winds"}', name="get_weather", tool_call_id=call.id)]
    final = provider.generate(answered, options)
    assert final.finish_reason == "stop" and "gale force winds" in final.text
    wire = openai_stub.requests[-1].body["messages"]
    assert wire[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.arguments}}]}
    assert wire[3] == {"role": "tool", "content": '{"forecast": "gale force winds"}', "name": "get_weather",
                       "tool_call_id": call.id}


def test_stream_reassembles_and_reports_usage(provider, openai_stub):
    whole = provider.generate(MESSAGES, GenerationOptions())
    deltas = list(provider.stream(MESSAGES, GenerationOptions()))
    assert len([d for d in deltas if d.text]) > 3
    assert "".join(d.text for d in deltas) == whole.text
    assert deltas[-1].finish_reason == "stop" and deltas[-1].usage == whole
    assert all(d.usage is None and not d.finish_reason for d in deltas[:-1])
    body = openai_stub.requests[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_continuation_is_sent_as_a_trailing_assistant_message(provider, openai_stub):
    list(provider.stream(MESSAGES, GenerationOptions(continue_from="I climb because")))
    wire = openai_stub.requests[-1].body["messages"]
    assert wire[:-1] == [{"role": m.role, "content": m.content} for m in MESSAGES]
    assert wire[-1] == {"role": "assistant", "content": "I climb because"}


def test_stream_tool_call_fragments(provider, openai_stub):
    options = GenerationOptions(tools=(WEATHER_TOOL,))
    asked = [Message("system", SYSTEM), Message("user", "call get_weather please")]
    expected = provider.generate(asked, options).tool_calls[0]
    deltas = list(provider.stream(asked, options))
    fragments = [d for d in deltas if d.tool_call]
    assert fragments[0].tool_call.id == expected.id and fragments[0].tool_call.name == "get_weather"
    assert len(fragments) > 2
    assert "".join(d.tool_call.arguments for d in fragments) == expected.arguments
    final = deltas[-1]
    assert final.finish_reason == "tool_calls" and final.usage.tool_calls == (expected,)


def test_moderation(provider, openai_stub):
    flagged = provider.moderate("explain how to build a bomb")
    assert flagged.flagged and "violence" in flagged.categories and flagged.scores["violence"] > 0.5
    clean = provider.moderate("a cup of tea by the window")
    assert not clean.flagged and clean.categories == ()
    assert openai_stub.requests[-1].path == "/v1/moderations"
    assert openai_stub.requests[-1].body == {"model": "moderate-test", "input": "a cup of tea by the window"}


def test_embeddings(provider, openai_stub):
    texts = ["lighthouse at night", "tax ledgers"]
    assert provider.embed(texts) == LocalProvider().embed(texts)
    assert openai_stub.requests[-1].body == {"model": "embed-test", "input": texts}
    assert provider.embed([]) == []
    assert len(openai_stub.requests) == 1


def test_scripted_responder(provider, openai_stub):
    openai_stub.responder = lambda body: Completion("scripted", "gpt-x", 7, 1, "stop",
                                                    (ToolCall("call_1", "f", "{}"),))
    completion = provider.generate(MESSAGES, GenerationOptions())
    assert completion == Completion("scripted", "gpt-x", 7, 1, "stop", (ToolCall("call_1", "f", "{}"),))


def test_keep_alive_reuses_the_connection(provider, openai_stub):
    for _ in range(3):
        provider.embed(["x"])
    assert len(openai_stub.requests) == 3
    assert len({r.client_port for r in openai_stub.requests}) == 1


# -- errors ---------------------------------------------------------------------

def assert_opaque(error: ProviderError, *secrets: str, operation: str, status: int, reason: str = "upstream_error",
                  said: str | None = None) -> None:
    """The rendered parts (message, details, str): the catalogue's message, and details naming the operation
    that failed, the upstream's HTTP status, the failure's reason and (under `upstreamMessage` only, short) what
    the upstream said; never anything in `secrets`."""
    rendered = json.dumps([error.message, {k: v for k, v in error.details.items() if k != "upstreamMessage"},
                           str(error)])
    for secret in secrets:
        assert secret not in rendered
    details = {"provider": "openai", "operation": operation, "upstreamStatus": status, "reason": reason,
               "retryable": True}
    if said is not None:
        details["upstreamMessage"] = said
    assert {k: v for k, v in error.details.items() if said is not None or k != "upstreamMessage"} == details


def test_500_maps_to_provider_error_with_the_envelope(provider, openai_stub):
    envelope = {"error": {"message": SECRET_DETAIL, "type": "server_error", "param": None, "code": "boom"}}
    openai_stub.inject_error(status=500, envelope=envelope)
    with pytest.raises(ProviderError) as caught:
        provider.generate(MESSAGES, GenerationOptions())
    error = caught.value
    assert type(error) is ProviderError and error.code == "provider_error" and error.spec.http_status == 502
    assert error.upstream == envelope and error.upstream_status == 500
    assert_opaque(error, SECRET_DETAIL, "boom", operation="chat.completions", status=500)
    assert "upstreamMessage" not in error.details and SECRET_DETAIL in error.log_cause()  # a 5xx's words: log only


@pytest.mark.parametrize("status", [429, 400, 401, 503])
def test_other_statuses_map_to_provider_error(provider, openai_stub, status):
    openai_stub.inject_error(status=status, path="/moderations")
    with pytest.raises(ProviderError) as caught:
        provider.moderate("hello")
    assert type(caught.value) is ProviderError
    assert caught.value.upstream_status == status and caught.value.upstream["error"]["type"] == "server_error"


def test_wrong_api_key_is_a_provider_error(openai_stub, provider):
    openai_stub.api_key = "sk-right"
    with pytest.raises(ProviderError) as caught:
        provider.embed(["x"])
    assert caught.value.upstream_status == 401
    assert caught.value.upstream["error"]["code"] == "invalid_api_key"


def test_non_json_error_body_is_kept_truncated(provider, openai_stub):
    openai_stub.inject_error(status=502, envelope="<html>Bad gateway " + "x" * 5000 + "</html>")
    with pytest.raises(ProviderError) as caught:
        provider.embed(["x"])
    assert caught.value.upstream["status"] == 502
    assert caught.value.upstream["body"].startswith("<html>Bad gateway") and len(caught.value.upstream["body"]) == 2000
    assert "upstreamMessage" not in caught.value.details
    assert '"Bad gateway [redacted]"' in caught.value.log_cause()  # its text, not its markup; a long run may be a key
    assert_opaque(caught.value, "Bad gateway", operation="embeddings", status=502)


@pytest.mark.parametrize("call", ["generate", "moderate", "embed"])
def test_malformed_body_is_a_provider_error(provider, openai_stub, call):
    openai_stub.inject_malformed(body="{not json at all")
    with pytest.raises(ProviderError) as caught:
        {"generate": lambda: provider.generate(MESSAGES, GenerationOptions()),
         "moderate": lambda: provider.moderate("x"),
         "embed": lambda: provider.embed(["x"])}[call]()
    assert type(caught.value) is ProviderError
    assert caught.value.upstream == {"status": 200, "body": "{not json at all"}
    operation = {"generate": "chat.completions", "moderate": "moderations", "embed": "embeddings"}[call]
    assert_opaque(caught.value, "not json", operation=operation, status=200, reason="malformed_response",
                  said="response is not JSON")


@pytest.mark.parametrize("body", [
    '{"choices": []}',
    '{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}',  # no usage
    '{"choices": [{"finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}',
    '[1, 2, 3]',
])
def test_missing_fields_are_a_provider_error(provider, openai_stub, body):
    openai_stub.inject_malformed(body=body)
    with pytest.raises(ProviderError) as caught:
        provider.generate(MESSAGES, GenerationOptions())
    assert caught.value.upstream_status == 200 and caught.value.upstream["status"] == 200


def test_missing_embedding_rows_are_a_provider_error(provider, openai_stub):
    openai_stub.inject_malformed(body='{"data": [{"index": 0, "embedding": [0.1]}]}')
    with pytest.raises(ProviderError):
        provider.embed(["a", "b"])


def test_slow_upstream_is_a_timeout(fast_timeout_provider, openai_stub):
    openai_stub.inject_delay(seconds=2.0)
    with pytest.raises(ProviderTimeout) as caught:
        fast_timeout_provider.generate(MESSAGES, GenerationOptions())
    error = caught.value
    assert error.code == "provider_timeout" and error.spec.http_status == 504
    assert error.upstream["error"] == "timeout" and error.upstream_status is None
    # The next request is served normally.
    assert fast_timeout_provider.embed(["x"])


def test_connection_refused_is_a_provider_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with OpenAIHTTPProvider(f"http://127.0.0.1:{port}/v1", timeout_seconds=2) as provider:
        with pytest.raises(ProviderError) as caught:
            provider.embed(["x"])
    assert type(caught.value) is ProviderError
    assert caught.value.upstream["error"] == "connection_error" and caught.value.upstream_status is None


def test_stream_error_before_first_chunk(provider, openai_stub):
    openai_stub.inject_error(status=500)
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(MESSAGES, GenerationOptions()))
    assert caught.value.upstream_status == 500 and caught.value.upstream["error"]["code"] == "internal_error"


def test_stream_without_done_is_a_provider_error(provider, openai_stub):
    openai_stub.inject_truncated_stream()
    received = []
    with pytest.raises(ProviderError) as caught:
        for delta in provider.stream(MESSAGES, GenerationOptions()):
            received.append(delta)
    assert received and caught.value.upstream == {"error": "truncated_stream"}


def test_stream_that_is_not_an_event_stream(provider, openai_stub):
    openai_stub.inject_malformed(body="{not json")
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(MESSAGES, GenerationOptions()))
    assert caught.value.upstream == {"status": 200, "body": "{not json"}


USAGE_CHUNK = '{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}'


def test_a_stream_skips_comments_other_fields_and_other_choices(provider, openai_stub):
    openai_stub.inject_events([": keep-alive", "event: completion", "id: 7",
                               'data: {"choices": [{"index": 1, "delta": {"content": "not this one"}}]}',
                               'data: {"choices": [{"index": 0, "delta": {"content": "Aye."}, "finish_reason": "stop"}]}',
                               f"data: {USAGE_CHUNK}", "data: [DONE]"])
    *deltas, last = provider.stream(MESSAGES, GenerationOptions())
    assert [d.text for d in deltas] == ["Aye."]
    assert last.usage is not None and (last.usage.text, last.usage.output_tokens) == ("Aye.", 1)


@pytest.mark.parametrize(("lines", "said"), [
    (["data: {not json"], "stream chunk is not JSON"),
    (["data: [1, 2]"], "stream chunk is not an object"),
    (['data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "first"}]}}]}'], "bad stream chunk"),
    (['data: {"choices": [{"index": 0, "delta": {"content": "Aye."}}]}', "data: [DONE]"], "stream carried no usage"),
])
def test_a_malformed_stream_is_a_provider_error(provider, openai_stub, lines, said):
    openai_stub.inject_events(lines)
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(MESSAGES, GenerationOptions()))
    assert caught.value.kind == "malformed_response" and caught.value.retryable  # another answer may be whole
    assert caught.value.upstream_message.startswith(said), caught.value.upstream_message


@pytest.mark.parametrize(("error", "kind"), [
    ({"message": "The server is overloaded.", "type": "server_error"}, "upstream_error_event"),
    ({"message": "The model `gpt-test` does not exist.", "type": "invalid_request_error", "code": "model_not_found"},
     "model_not_found"),
])
@pytest.mark.parametrize("where", ["in the stream", "instead of it"])
def test_an_error_in_place_of_a_stream_is_named(provider, openai_stub, error, kind, where):
    """An upstream that answers a stream with an error: as an event in it, or as a whole JSON body (200)."""
    if where == "in the stream":
        openai_stub.inject_events([f"data: {json.dumps({'error': error})}"])
    else:
        openai_stub.inject_malformed(body=json.dumps({"error": error}))
    with pytest.raises(ProviderError) as caught:
        list(provider.stream(MESSAGES, GenerationOptions()))
    assert caught.value.kind == kind and caught.value.upstream == {"error": error}


def test_stream_stalling_mid_way_is_a_timeout(fast_timeout_provider, openai_stub):
    openai_stub.inject_delay(seconds=2.0, mid_stream=True)
    received = []
    with pytest.raises(ProviderTimeout):
        for delta in fast_timeout_provider.stream(MESSAGES, GenerationOptions()):
            received.append(delta)
    assert not any(d.usage for d in received)


# -- retrying and the factory over HTTP ------------------------------------------------

def test_retrying_recovers_from_transient_500s(provider, openai_stub):
    slept = []
    retrying = Retrying(provider, sleep=slept.append)
    openai_stub.inject_error(times=2, status=500, path="/chat/completions")
    completion = retrying.generate(MESSAGES, GenerationOptions())
    assert completion.text and slept == [1.0, 2.0]
    assert [f.upstream_status for f in retrying.failures] == [500, 500]
    assert retrying.failures[0].upstream["error"]["type"] == "server_error"
    assert len(openai_stub.requests_to("/chat/completions")) == 3


def test_retrying_stream_retries_only_before_the_first_delta(provider, openai_stub):
    slept = []
    retrying = Retrying(provider, sleep=slept.append)
    openai_stub.inject_error(times=1, status=503)
    text = "".join(d.text for d in retrying.stream(MESSAGES, GenerationOptions()))
    assert text == provider.generate(MESSAGES, GenerationOptions()).text and slept == [1.0]

    openai_stub.inject_truncated_stream()
    with pytest.raises(ProviderError):
        list(retrying.stream(MESSAGES, GenerationOptions()))
    assert slept == [1.0] and len(retrying.failures) == 1


@pytest.fixture
def provider_env(monkeypatch):
    """Provider settings read from exactly these environment variables."""

    def settings(**env: str) -> ProviderSettings:
        for name in ProviderSettings.model_fields:
            monkeypatch.delenv(f"PERSONA_{name.upper()}", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return read(ProviderSettings)

    return settings


def test_factory_builds_a_working_openai_provider(openai_stub, provider_env):
    provider = make_provider(provider_env(
        PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL=openai_stub.base_url,
        PERSONA_OPENAI_API_KEY="sk-env", PERSONA_OPENAI_MODEL="gpt-env",
        PERSONA_PROVIDER_TIMEOUT_SECONDS="3", PERSONA_PROVIDER_BACKOFF_SECONDS="0.25",
        PERSONA_MODERATION_PROVIDER="openai", PERSONA_EMBEDDING_PROVIDER="openai",
    ))
    try:
        assert isinstance(provider, Retrying) and provider.name == "openai"
        assert provider.delays == (0.25, 0.5, 1.0)
        assert provider.generate(MESSAGES, GenerationOptions()).model == "gpt-env"
        request = openai_stub.requests[-1]
        assert request.headers["authorization"] == "Bearer sk-env"
        provider.embed(["x"])
        provider.moderate("x")
        assert openai_stub.requests[-2].body["model"] == "text-embedding-3-small"
        assert openai_stub.requests[-1].body["model"] == "omni-moderation-latest"
        assert provider.provider.timeout_seconds == 3.0
    finally:
        provider.close()


def test_factory_defaults_and_validation(provider_env):
    default = make_provider(provider_env())
    assert default.name == "local" and isinstance(default.provider, LocalProvider)
    assert default.delays == (1.0, 2.0, 4.0)
    assert isinstance(make_base_provider(provider_env(PERSONA_PROVIDER="LOCAL")), LocalProvider)
    with pytest.raises(InvalidSetting, match="PERSONA_OPENAI_BASE_URL"):
        provider_env(PERSONA_PROVIDER="openai")
    with pytest.raises(InvalidSetting, match="PERSONA_PROVIDER"):
        provider_env(PERSONA_PROVIDER="anthropic")
    with pytest.raises(InvalidSetting, match="http"):
        provider_env(PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL="api.example.com/v1")
    with pytest.raises(InvalidSetting, match="PERSONA_PROVIDER_BACKOFF_SECONDS"):
        provider_env(PERSONA_PROVIDER_BACKOFF_SECONDS="soon")
    # Only the chat model is remote unless moderation and embeddings are configured too.
    chat_only = make_base_provider(provider_env(PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL="http://127.0.0.1:9/v1/"))
    assert isinstance(chat_only, Composed) and isinstance(chat_only.chat, OpenAIHTTPProvider)
    assert isinstance(chat_only.moderation, LocalProvider) and chat_only.moderation is chat_only.embeddings
    assert chat_only.name == "openai" and chat_only.model == "gpt-4o-mini"
    assert chat_only.embedding_model == "local-embedding"
    chat_only.close()
    with pytest.raises(InvalidSetting, match="PERSONA_EMBEDDING_BASE_URL"):
        provider_env(PERSONA_EMBEDDING_PROVIDER="openai")
    openai = make_base_provider(provider_env(PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL="http://127.0.0.1:9/v1/",
                                             PERSONA_MODERATION_PROVIDER="openai", PERSONA_EMBEDDING_PROVIDER="openai"))
    try:
        assert isinstance(openai, OpenAIHTTPProvider)
        assert (openai.model, openai.embedding_model, openai.moderation_model, openai.timeout_seconds) == (
            "gpt-4o-mini", "text-embedding-3-small", "omni-moderation-latest", 30.0)
        assert openai.base_url == "http://127.0.0.1:9/v1"
    finally:
        openai.close()


# -- each failure's reason (kernel.model_failures) ----------------------------------------

OLLAMA_404 = {"error": {"message": 'model "llama3" not found, try pulling it first', "type": "api_error",
                        "param": None, "code": None}}


@pytest.mark.parametrize("status, envelope, reason, retryable", [
    (401, None, "upstream_auth", False),
    (403, None, "upstream_auth", False),
    (404, OLLAMA_404, "model_not_found", False),
    (404, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404},
     "model_not_found", False),
    (404, "404 page not found", "endpoint_not_found", False),
    (400, None, "upstream_rejected", False),
    (429, None, "upstream_rate_limited", True),
    (503, None, "upstream_unavailable", True),
    (500, None, "upstream_error", True),
    (408, None, "timeout", True),
])
def test_each_status_has_its_reason(provider, openai_stub, status, envelope, reason, retryable):
    openai_stub.inject_error(status=status, envelope=envelope, path="/chat/completions")
    with pytest.raises(ProviderError) as caught:
        provider.generate(MESSAGES, GenerationOptions())
    error = caught.value
    assert (error.kind, error.retryable, error.details["reason"], error.details["retryable"]) == (
        reason, retryable, reason, retryable)
    assert error.details["upstreamStatus"] == status
    assert (error.headers.get("x-should-retry") == "false") is (not retryable)
    if reason == "model_not_found" and envelope is OLLAMA_404:
        assert error.details["upstreamMessage"] == 'model "llama3" not found, try pulling it first'


def test_a_wrong_key_is_never_shown(openai_stub):
    openai_stub.api_key = "sk-right"
    openai_stub.inject_error(status=401, envelope={"error": {
        "message": "Incorrect API key provided: sk-wrong-12345678. You can find your API key at "
                   "https://platform.openai.com/account/api-keys.", "type": "invalid_request_error", "code": None}})
    with OpenAIHTTPProvider(openai_stub.base_url, api_key="sk-wrong-12345678") as provider:
        with pytest.raises(ProviderError) as caught:
            provider.embed(["x"])
    said = caught.value.details["upstreamMessage"]
    assert "sk-wrong" not in said and "https://" not in said and said.startswith("Incorrect API key provided: [key]")
    assert caught.value.kind == "upstream_auth" and "x-should-retry" in caught.value.headers


def test_a_message_quoting_the_prompt_is_withheld(provider, openai_stub):
    prompt = "My secret plan is to paint the lighthouse purple at midnight"
    openai_stub.inject_error(status=400, envelope={"error": {"message": f"Bad input: '{prompt}' is too long"}})
    with pytest.raises(ProviderError) as caught:
        provider.generate([Message("user", prompt)], GenerationOptions())
    assert "lighthouse" not in json.dumps(caught.value.details) and "withheld" in caught.value.details["upstreamMessage"]


def test_retry_after_is_read_and_a_429_answers_503(provider, openai_stub):
    openai_stub.inject_error(status=429, headers={"Retry-After": "3"}, path="/chat/completions")
    with pytest.raises(ProviderError) as caught:
        provider.generate(MESSAGES, GenerationOptions())
    error = caught.value
    assert error.retry_after == 3.0 and error.code == "service_unavailable" and error.spec.http_status == 503
    assert error.headers["retry-after"] == "3" and error.details["retryAfter"] == 3


def test_retrying_waits_the_upstream_retry_after_within_its_budget(provider, openai_stub):
    slept: list[float] = []
    openai_stub.inject_error(times=9, status=429, headers={"Retry-After": "3"}, path="/chat/completions")
    retrying = Retrying(provider, delays=(0.01, 0.02, 0.04), sleep=slept.append, budget_seconds=7)
    with pytest.raises(ProviderError):
        retrying.generate(MESSAGES, GenerationOptions())
    assert slept == [3.0, 3.0, 3.0]  # never sooner than asked; (a real clock's budget cuts it shorter)

    openai_stub.reset()
    openai_stub.inject_error(times=9, status=429, headers={"Retry-After": "30"}, path="/chat/completions")
    slept.clear()
    with pytest.raises(ProviderError) as caught:
        retrying.generate(MESSAGES, GenerationOptions())
    assert slept == [] and caught.value.headers["retry-after"] == "30"  # past the budget: the caller waits


def test_configuration_errors_are_not_retried(provider, openai_stub):
    slept: list[float] = []
    openai_stub.inject_error(times=9, status=404, envelope=OLLAMA_404, path="/chat/completions")
    with pytest.raises(ProviderError):
        Retrying(provider, sleep=slept.append).generate(MESSAGES, GenerationOptions())
    assert slept == [] and len(openai_stub.requests_to("/chat/completions")) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_cut_connection_is_named(provider, openai_stub, stream):
    openai_stub.inject_cut(path="/chat/completions")
    with pytest.raises(ProviderError) as caught:
        if stream:
            list(provider.stream(MESSAGES, GenerationOptions()))
        else:
            provider.generate(MESSAGES, GenerationOptions())
    assert caught.value.kind == "connection_closed" and caught.value.retryable
    assert "upstreamStatus" not in caught.value.details


def test_refused_timeout_and_truncated_are_named(fast_timeout_provider, openai_stub):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with OpenAIHTTPProvider(f"http://127.0.0.1:{port}/v1", timeout_seconds=2) as dead:
        with pytest.raises(ProviderError) as caught:
            dead.generate(MESSAGES, GenerationOptions())
    assert caught.value.details["reason"] == "connection_refused" and str(port) not in json.dumps(caught.value.details)
    openai_stub.inject_delay(seconds=2.0)
    with pytest.raises(ProviderTimeout) as timed_out:
        fast_timeout_provider.generate(MESSAGES, GenerationOptions())
    assert timed_out.value.details["reason"] == "timeout"
    openai_stub.inject_truncated_stream()
    with pytest.raises(ProviderError) as cut:
        list(fast_timeout_provider.stream(MESSAGES, GenerationOptions()))
    assert cut.value.details["reason"] == "stream_cut"
