"""A real model, the way people run them (mirrors providers/factory.py, providers/composed.py and the error
details of kernel/models.py): two stacks through Envoy, one on a plain local model server that offers
only `/v1/chat/completions` (as Ollama, vLLM and llama.cpp's server do; moderation and embeddings stay
local, the default), one on an upstream with the full set (chat, moderation and embeddings all sent
there). A failing upstream answers 502 naming the operation, its status and the failure's reason
(kernel.model_failures), never a secret; one not worth retrying says so, one that asked to wait passes its
`Retry-After` on (docs/real-model.md, "When the model fails")."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from persona_service.kernel.models import ProviderError
from persona_service.providers.factory import make_base_provider
from persona_service.providers.settings import ProviderSettings
from providers.openai_stub import DEFAULT_ERROR, OpenAIStub
from support import (
    TenantFactory,
    assert_envelope,
    client_for,
    engine_for,
    make_stack,
    make_stack_beside,
    running,
    sse_events,
)

API_KEY = "sk-stub-secret-9f8e7d"
FAST = {"PERSONA_PROVIDER_BACKOFF_SECONDS": "0.01", "PERSONA_PROVIDER_TIMEOUT_SECONDS": "5",
        "PERSONA_PROVIDER_RETRY_BUDGET_SECONDS": "5"}
ATTEMPTS = 4  # the first try and 3 retries
DEFAULT_ERROR_MESSAGE = DEFAULT_ERROR["message"]


@pytest.fixture(scope="module")
def chat_only():
    with OpenAIStub(chat_only=True) as stub:
        yield stub


@pytest.fixture(scope="module")
def full_set():
    with OpenAIStub(api_key=API_KEY) as stub:
        yield stub


@pytest.fixture(scope="module")
def stacks(tmp_path_factory, chat_only, full_set):
    """{"chat_only": stack, "full_set": stack}, the second on the first's PostgreSQL and Redis."""
    # No webhook worker in either: nothing here is delivered.
    first = make_stack(tmp_path_factory.mktemp("model-chat-only"), workers=0, **chat_only.stack_env(**FAST))
    with running(first):
        second = make_stack_beside(first, tmp_path_factory.mktemp("model-full-set"), runners=1,  # its provider's
                                   **full_set.stack_env(PERSONA_OPENAI_API_KEY=API_KEY, **FAST))
        with running(second):
            yield {"chat_only": first, "full_set": second}


@pytest.fixture(scope="module")
def org(stacks):
    with engine_for(stacks["chat_only"]) as engine:
        return TenantFactory(engine)(plan="enterprise")


@pytest.fixture(autouse=True)
def clean(chat_only, full_set):
    for stub in (chat_only, full_set):
        stub.reset()
    full_set.api_key = API_KEY
    yield


def _persona(client, org, intent: str) -> dict:
    r = client.post("/v1/personas", json={"intent": intent}, headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "active"
    return r.json()


def _streamed_persona(client, org, intent: str) -> dict:
    with client.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                       headers=org.auth) as r:
        assert r.status_code == 200
        events = list(sse_events(r.iter_lines()))
    assert events[-1]["event"] == "persona" and events[-1]["persona"]["state"] == "active", events[-1]
    return events[-1]["persona"]


def _converse(client, org, persona: dict) -> None:
    """A chat session's reply whole and streamed, and the OpenAI-compatible completion whole and streamed."""
    r = client.post("/v1/chat/sessions", headers=org.auth, json={"personaId": persona["id"], "userId": "u-1"})
    assert r.status_code == 200, r.text
    messages = f"/v1/chat/sessions/{r.json()['sessionId']}/messages"
    r = client.post(messages, headers=org.auth, json={"content": "How was your day?"})
    assert r.status_code == 200, r.text
    assert r.json()["reply"]["content"]
    with client.stream("POST", messages, params={"stream": "true"}, headers=org.auth,
                       json={"content": "Tell me more"}) as r:
        assert r.status_code == 200
        events = list(sse_events(r.iter_lines()))
    assert events[-1]["event"] == "message.completed" and events[-1]["reply"]["content"], events
    assert "".join(e["delta"] for e in events if e["event"] == "message.delta") == events[-1]["reply"]["content"]

    body = {"model": f"persona://{persona['id']}", "messages": [{"role": "user", "content": "Hello?"}]}
    r = client.post("/v1/chat/completions", headers=org.auth, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]
    with client.stream("POST", "/v1/chat/completions", headers=org.auth, json={**body, "stream": True}) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and len(lines) > 2


def test_a_chat_only_server_serves_personas_and_chat(stacks, org, chat_only):
    with client_for(stacks["chat_only"], timeout=60) as client:
        _converse(client, org, _persona(client, org, "A retired sea captain who restores clocks"))
        _streamed_persona(client, org, "A shy violinist who bakes bread at night")
    assert chat_only.requests, "the chat model was never asked"
    assert {r.path for r in chat_only.requests} == {"/v1/chat/completions"}
    assert any(r.body.get("stream") for r in chat_only.requests) and any(
        not r.body.get("stream") for r in chat_only.requests)


def test_a_full_set_server_serves_chat_moderation_and_embeddings(stacks, org, full_set):
    with client_for(stacks["full_set"], timeout=60) as client:
        persona = _persona(client, org, "A patient beekeeper who writes haiku")
        voice = client.get(f"/v1/personas/{persona['id']}/voice", headers=org.auth).json()
        _converse(client, org, persona)
        _streamed_persona(client, org, "A loud auctioneer who collects seashells")
    assert {"/v1/chat/completions", "/v1/moderations", "/v1/embeddings"} <= {r.path for r in full_set.requests}
    assert {r.headers["authorization"] for r in full_set.requests} == {f"Bearer {API_KEY}"}
    assert voice["fingerprintModel"] == "text-embedding-3-small"


def test_each_stack_is_served_by_its_own_runners_only(stacks, org, chat_only, full_set):
    """The two stacks share PostgreSQL and Redis: each one's model calls and streamed runs are done by its own
    runner (configured for its model), never by the other's (providers.factory.fingerprint)."""
    for name, own, other in (("chat_only", chat_only, full_set), ("full_set", full_set, chat_only)):
        with client_for(stacks[name], timeout=60) as client:
            _persona(client, org, f"A {name} lighthouse keeper who paints storms")
            for n in range(3):
                _streamed_persona(client, org, f"A {name} tailor number {n} who sews maps")
        assert own.requests, name
        assert not other.requests, (name, [r.path for r in other.requests])
        other.reset()
        own.reset()


def test_a_runner_waits_on_several_http_model_calls_at_once(stacks, org, chat_only):
    """An HTTP model's call holds no CPU while it waits, so a runner does not answer such calls one at a time
    (providers.factory.model_turns): two replies' model calls are both at the model before either is answered.
    With one turn a runner (the default before), the second waited for the first: one call per model latency."""
    with client_for(stacks["chat_only"], timeout=60) as client:
        persona = _persona(client, org, "A patient ferryman who counts gulls")
        sessions = [client.post("/v1/chat/sessions", headers=org.auth,
                                json={"personaId": persona["id"], "userId": f"u-turn-{n}"}).json()["sessionId"]
                    for n in range(2)]
    chat_only.reset()
    chat_only.inject_hold(times=2, path="/chat/completions")
    with ThreadPoolExecutor(2) as pool:
        def send(n: int) -> int:
            with client_for(stacks["chat_only"], timeout=60) as own:
                return own.post(f"/v1/chat/sessions/{sessions[n]}/messages", headers=org.auth,
                                json={"content": f"Which way is the wind? (turn-{n})"}).status_code

        def asked() -> set[str]:  # the replies whose model call reached the model (a retry asks the same)
            return {m["content"] for r in chat_only.requests_to("/chat/completions")
                    for m in r.body["messages"] if m.get("role") == "user" and "(turn-" in str(m.get("content"))}

        answers = [pool.submit(send, n) for n in range(2)]
        try:
            deadline = time.monotonic() + 4  # under the stack's 5 s provider timeout: a held call is not retried
            while len(asked()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            at_once = len(asked())
        finally:
            chat_only.release()
        assert [a.result() for a in answers] == [200, 200]
    assert at_once == 2, "the second reply's model call waited for the first to be answered"


def _assert_no_secret(response) -> None:
    for secret in (API_KEY, "127.0.0.1:", "http://"):
        assert secret not in response.text, response.text


def test_a_failing_upstream_names_its_operation_and_status(stacks, org, full_set):
    full_set.inject_error(times=1, status=404, path="/embeddings")  # a client error: not retried
    with client_for(stacks["full_set"], timeout=60) as client:
        r = client.post("/v1/personas", json={"intent": "A cheerful cartographer of imaginary islands"},
                        headers=org.auth)
    error = assert_envelope(r, 502, "provider_error")
    assert error["details"] == {"provider": "openai", "operation": "embeddings", "upstreamStatus": 404,
                                "reason": "endpoint_not_found", "retryable": False,
                                "upstreamMessage": "The server had an error while processing your request."}
    assert r.headers["x-should-retry"] == "false"
    _assert_no_secret(r)
    assert len(full_set.requests_to("/embeddings")) == 1


def test_a_failing_chat_model_names_chat_completions(stacks, org, chat_only):
    with client_for(stacks["chat_only"], timeout=60) as client:
        persona = _persona(client, org, "A soft-spoken gardener who knows every rose")
        r = client.post("/v1/chat/sessions", headers=org.auth, json={"personaId": persona["id"], "userId": "u-2"})
        chat_only.inject_error(times=ATTEMPTS, status=502, path="/chat/completions")
        r = client.post(f"/v1/chat/sessions/{r.json()['sessionId']}/messages", headers=org.auth,
                        json={"content": "Any advice?"})
    error = assert_envelope(r, 502, "provider_error")
    assert error["details"] == {"provider": "openai", "operation": "chat.completions", "upstreamStatus": 502,
                                "reason": "upstream_error", "retryable": True}  # a 5xx's words: the log only
    _assert_no_secret(r)


def test_a_model_that_answers_no_json_says_why(stacks, org, chat_only):
    """A small model that ignores the JSON instructions: the run fails naming the step's problem."""
    chat_only.responder = lambda body: _plain_text(body)
    with client_for(stacks["chat_only"], timeout=60) as client:
        r = client.post("/v1/personas", json={"intent": "A stubborn mule driver"}, headers=org.auth)
    error = assert_envelope(r, 502, "provider_error")
    assert error["details"] == {"provider": "openai", "operation": "chat.completions", "reason": "reply_not_json",
                                "retryable": True, "upstreamMessage": "the reply was not a JSON object"}


# -- when the model fails: each failure through the edge (docs/real-model.md) -----------------------------

OLLAMA_404 = {"error": {"message": 'model "llama3" not found, try pulling it first', "type": "api_error",
                        "param": None, "code": None}}


@pytest.fixture(scope="module")
def dead(stacks, tmp_path_factory):
    """A stack whose model server is not running: its address refuses connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    stack = make_stack_beside(stacks["chat_only"], tmp_path_factory.mktemp("model-dead"), runners=1,  # its provider's
                              PERSONA_PROVIDER="openai", PERSONA_OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", **FAST)
    with running(stack):
        yield stack


def _create(stack, org, intent: str):
    with client_for(stack, timeout=60) as client:
        started = time.monotonic()
        r = client.post("/v1/personas", json={"intent": intent}, headers=org.auth)
    return r, time.monotonic() - started


def _server_log(stack) -> str:
    return "\n".join(p.read_text(errors="replace") for p in stack.log_dir.glob("server-*.log"))


def _failure(r, status: int, code: str, reason: str, retryable: bool) -> dict:
    error = assert_envelope(r, status, code)
    details = error["details"]
    assert details["provider"] == "openai" and details["reason"] == reason, details
    assert details["retryable"] is retryable and r.headers["x-should-retry"] == str(retryable).lower(), details
    _assert_no_secret(r)
    return details


def test_a_wrong_key_is_not_retried_and_says_so(stacks, org, full_set):
    full_set.api_key = "sk-another-key-0000"  # the stack sends API_KEY: every call gets 401
    r, _ = _create(stacks["full_set"], org, "A wary locksmith who forgot her own keys")
    details = _failure(r, 502, "provider_error", "upstream_auth", False)
    assert details["upstreamStatus"] == 401 and details["upstreamMessage"] == "Incorrect API key provided."
    assert "retry-after" not in r.headers
    assert len(full_set.requests) == 1, [q.path for q in full_set.requests]  # not retried
    log = _server_log(stacks["full_set"])
    assert f"request_id={r.headers['x-request-id']}" in log and "upstream_auth" in log
    assert API_KEY not in log


def test_a_model_the_server_does_not_have_is_named(stacks, org, chat_only):
    chat_only.inject_error(times=9, status=404, envelope=OLLAMA_404, path="/chat/completions")
    r, _ = _create(stacks["chat_only"], org, "A llama herder who sings to the stars")
    details = _failure(r, 502, "provider_error", "model_not_found", False)
    assert details == {"provider": "openai", "operation": "chat.completions", "upstreamStatus": 404,
                       "reason": "model_not_found", "retryable": False,
                       "upstreamMessage": 'model "llama3" not found, try pulling it first'}
    assert len(chat_only.requests_to("/chat/completions")) == 1
    log = _server_log(stacks["chat_only"])  # (JSON lines: the quotes escaped)
    assert f"request_id={r.headers['x-request-id']} " in log and 'model_not_found' in log and 'llama3' in log


def test_a_failing_server_is_retried_a_bounded_number_of_times(stacks, org, chat_only):
    chat_only.inject_error(times=99, status=500, path="/chat/completions")
    r, _ = _create(stacks["chat_only"], org, "A clockmaker whose clocks all run late")
    details = _failure(r, 502, "provider_error", "upstream_error", True)
    assert details["upstreamStatus"] == 500 and "upstreamMessage" not in details
    assert DEFAULT_ERROR_MESSAGE in _server_log(stacks["chat_only"])  # the operator sees what the model said
    assert len(chat_only.requests_to("/chat/completions")) == ATTEMPTS


def test_a_rate_limited_server_is_waited_for_then_its_retry_after_passed_on(stacks, org, chat_only):
    """429 with Retry-After: 3: the retry comes 3 s later, not after the 0.01 s backoff; the next would end past
    the 5 s budget, so the client gets 503 with the upstream's Retry-After."""
    chat_only.inject_error(times=99, status=429, path="/chat/completions", headers={"Retry-After": "3"},
                           envelope={"error": {"message": "Rate limit reached for requests", "type": "requests",
                                               "param": None, "code": "rate_limit_exceeded"}})
    r, elapsed = _create(stacks["chat_only"], org, "An impatient courier who hates waiting")
    details = _failure(r, 503, "service_unavailable", "upstream_rate_limited", True)
    assert details["upstreamStatus"] == 429 and details["retryAfter"] == 3
    assert details["upstreamMessage"] == "Rate limit reached for requests"
    assert r.headers["retry-after"] == "3"
    calls = chat_only.requests_to("/chat/completions")
    assert len(calls) == 2 and 3.0 <= elapsed, (len(calls), elapsed)  # waited for Retry-After; 2 calls, no third


def test_a_refused_connection_is_named(dead, org):
    r, _ = _create(dead, org, "A hermit who never answers the door")
    details = _failure(r, 502, "provider_error", "connection_refused", True)
    assert "upstreamStatus" not in details and details["operation"] == "chat.completions"
    assert "connection_refused" in _server_log(dead)


def test_a_cut_answer_is_named(stacks, org, chat_only):
    chat_only.inject_cut(times=99, path="/chat/completions")
    r, _ = _create(stacks["chat_only"], org, "A storyteller who never finishes a sentence")
    details = _failure(r, 502, "provider_error", "connection_closed", True)
    assert "upstreamStatus" not in details and "peer closed connection" in details["upstreamMessage"]
    assert len(chat_only.requests_to("/chat/completions")) == ATTEMPTS


def test_an_answer_that_is_not_json_is_named(stacks, org, chat_only):
    chat_only.inject_malformed(times=99, body="<html>oops</html>", path="/chat/completions")
    r, _ = _create(stacks["chat_only"], org, "A typesetter who mixes up his fonts")
    details = _failure(r, 502, "provider_error", "malformed_response", True)
    assert details["upstreamStatus"] == 200 and details["upstreamMessage"] == "response is not JSON"


def test_the_python_sdk_does_not_retry_what_the_service_says_not_to(stacks, org, full_set):
    from persona_sdk import PersonaClient
    from persona_sdk._errors import PersonaError

    full_set.api_key = "sk-another-key-0000"
    with PersonaClient(api_key=org.api_key, base_url=stacks["full_set"].http_url, backoff_base=0.5) as client:
        started = time.monotonic()
        with pytest.raises(PersonaError) as raised:
            client.personas.create(intent="A careful archivist who double-checks everything")
        elapsed = time.monotonic() - started
    assert raised.value.code == "provider_error" and raised.value.details["reason"] == "upstream_auth"
    # No retry: one upstream request (a bound, not a speed: the SDK's retries would take 0.5 + 1 + 2 s more).
    assert len(full_set.requests) == 1 and elapsed < 30, (len(full_set.requests), elapsed)


def _plain_text(body):
    from persona_service.kernel.models import Completion

    return Completion("Sure! Here is a persona for you.", "tiny-model", 10, 7)


def test_moderation_sent_to_a_chat_only_server_fails_naming_it(chat_only):
    """Where moderation is pointed at a server without `/moderations`, the error says which call failed."""
    provider = make_base_provider(ProviderSettings(
        provider="openai", openai_base_url=chat_only.base_url, openai_api_key=API_KEY, moderation_provider="openai"))
    try:
        with pytest.raises(ProviderError) as raised:
            provider.moderate("hello")
        assert raised.value.details == {"provider": "openai", "operation": "moderations", "upstreamStatus": 404,
                                        "reason": "endpoint_not_found", "retryable": False,
                                        "upstreamMessage": "404 page not found"}
        assert provider.embed(["hello"]) and not chat_only.requests_to("/embeddings")  # embeddings stay local
    finally:
        provider.close()


def test_parts_on_their_own_upstream_never_get_the_chat_key(chat_only, full_set):
    settings = ProviderSettings(provider="openai", openai_base_url=chat_only.base_url, openai_api_key="sk-chat",
                                embedding_provider="openai", embedding_base_url=full_set.base_url,
                                moderation_provider="openai")
    assert settings.upstream("embedding") == (full_set.base_url, "")
    assert settings.upstream("moderation") == (chat_only.base_url, "sk-chat")
    assert settings.upstream("chat") == (chat_only.base_url, "sk-chat")
    assert ProviderSettings().upstream("moderation") is None


def test_the_banner_says_which_model_answers():
    """`up`'s banner line: the default is an offline test model; a real one is named without credentials."""
    from persona_service.providers.factory import describe

    assert "offline template echo, not a real model" in describe(ProviderSettings())
    assert "docs/real-model.md" in describe(ProviderSettings())
    line = describe(ProviderSettings(provider="openai", openai_base_url="http://me:pw@127.0.0.1:11434/v1?k=s",
                                     openai_api_key=API_KEY, openai_model="llama3.2"))
    assert line == "llama3.2 at http://127.0.0.1:11434/v1 (moderation local, embeddings local)"
    # A remote part is named with its model, and its own server where it has one (issue 48).
    line = describe(ProviderSettings(provider="openai", openai_base_url="http://127.0.0.1:11434/v1",
                                     openai_model="llama3.2", embedding_provider="openai",
                                     openai_embedding_model="nomic-embed-text", moderation_provider="openai",
                                     moderation_base_url="https://api.openai.com/v1", image_provider="openai"))
    assert line == ("llama3.2 at http://127.0.0.1:11434/v1 (moderation omni-moderation-latest at "
                    "https://api.openai.com/v1, embeddings nomic-embed-text remote, images gpt-image-1 remote)")


# -- prices: a model without one is reported as such, never as $0 ------------------------------------------


def test_a_model_without_a_price_is_reported_unpriced(stacks, org, chat_only):
    from dataclasses import replace

    from providers.openai_stub import local_responder

    with client_for(stacks["chat_only"], timeout=60) as client:
        persona = _persona(client, org, "A frugal accountant who counts every grain of rice")
        r = client.post("/v1/chat/sessions", headers=org.auth, json={"personaId": persona["id"], "userId": "u-9"})
        messages = f"/v1/chat/sessions/{r.json()['sessionId']}/messages"
        r = client.post(messages, headers=org.auth, json={"content": "What did lunch cost?"})
        assert r.status_code == 200, r.text
        priced = r.json()["reply"]
        assert priced["model"] == "gpt-4o-mini" and priced["usage"]["costUsdMicros"] > 0  # built-in price
        assert priced["usage"]["unpriced"] is False
        session = messages.split("/")[-2]
        assert client.get(f"/v1/chat/sessions/{session}", headers=org.auth).json()["unpricedReplies"] == 0
        chat_only.responder = lambda body: replace(local_responder(body), model="llama3.2")
        r = client.post(messages, headers=org.auth, json={"content": "And dinner?"})
        assert r.status_code == 200, r.text
        reply = r.json()["reply"]
        assert reply["model"] == "llama3.2" and reply["usage"]["inputTokens"] > 0
        assert reply["usage"]["unpriced"] is True and reply["usage"]["costUsdMicros"] == 0
        # The session and usage over time say their cost is a lower bound, and how many replies it leaves out.
        got = client.get(f"/v1/chat/sessions/{session}", headers=org.auth).json()
        assert got["unpricedReplies"] == 1 and got["costUsdMicros"] == priced["usage"]["costUsdMicros"]
        usage = client.get("/v1/usage", headers=org.auth, params={"groupBy": "persona"}).json()
        assert usage["totals"]["generations"] >= 2 and usage["totals"]["unpricedGenerations"] == 1
        # Stored with the reply: read again, it is still unpriced (the read does not consult today's prices).
        listed = client.get(messages, headers=org.auth).json()["items"]
        assert [m["usage"]["unpriced"] for m in listed if m["role"] == "assistant"] == [False, True]


def test_prices_built_in_configured_and_unknown():
    from persona_service.providers.pricing import DEFAULT_PRICES, PriceTable
    from persona_service.providers.settings import ProviderSettings

    table = PriceTable.from_env(ProviderSettings())
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "text-embedding-3-small",
                  "text-embedding-3-large", "local-persona-1", "gpt-4o-mini-2024-07-18"):
        assert table.priced(model), model
    assert table.cost_micros("gpt-4o-mini-2024-07-18", 1_000_000, 0) == 150_000
    assert not table.priced("llama3.2") and table.cost_micros("llama3.2", 1000, 1000) == 0
    assert table.unpriced(["llama3.2", "gpt-4o", "llama3.2", "nomic-embed-text"]) == ["llama3.2", "nomic-embed-text"]
    assert "*" not in DEFAULT_PRICES
    configured = PriceTable.from_env(ProviderSettings(model_prices={"llama3.2": {"input": 0, "output": 0}}))
    assert configured.priced("llama3.2")  # priced 0 on purpose: a real $0
    assert PriceTable.from_env(ProviderSettings(model_prices={"*": {"input": 1, "output": 1}})).priced("anything")


def test_the_banner_names_models_without_a_price(monkeypatch):
    from persona_service.providers.pricing import describe

    assert describe("gpt-4o-mini", "text-embedding-3-small") == "known for gpt-4o-mini, text-embedding-3-small"
    line = describe("llama3.2", "nomic-embed-text")
    assert line.startswith("none for llama3.2, nomic-embed-text: costs reported as unknown") and "$0" in line
