"""Provider failures end to end, for persona generation and chat replies (mirrors providers/openai_http.py,
providers/retrying.py and the pipeline's failure path): a separate stack
whose server talks to a real OpenAI-compatible HTTP stub that injects 500s
and timeouts. Retries exhausted → 502 `provider_error` / 504
`provider_timeout` with nothing of the upstream envelope in the body; the
upstream envelope is in the audit log; the failed run is an event."""

from __future__ import annotations

import json

import httpx
import pytest
from providers.openai_stub import OpenAIStub
from support import TenantFactory, assert_envelope, client_for, engine_for, make_stack, running, sse_events, sse_stream

SECRET_MESSAGE = "upstream-secret-xyzzy: shard 7 of cluster orion overloaded"
SECRET_CODE = "upstream_code_4242"
UPSTREAM = {"error": {"message": SECRET_MESSAGE, "type": "server_error", "param": None, "code": SECRET_CODE}}
ATTEMPTS = 4  # the first try and 3 retries


@pytest.fixture(scope="module")
def stub():
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture(scope="module")
def pstack(tmp_path_factory, stub):
    stack = make_stack(
        tmp_path_factory.mktemp("persona-openai"), workers=0,  # no webhook worker: nothing here is delivered
        **stub.stack_env(PERSONA_PROVIDER_BACKOFF_SECONDS="0.01", PERSONA_PROVIDER_TIMEOUT_SECONDS="1"),
    )
    with running(stack):
        yield stack


@pytest.fixture(scope="module")
def pengine(pstack):
    with engine_for(pstack) as engine:
        yield engine


@pytest.fixture(scope="module")
def phttp(pstack):
    with client_for(pstack, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def org(pengine):
    return TenantFactory(pengine)(plan="enterprise")


@pytest.fixture(autouse=True)
def clean_stub(stub):
    stub.reset()
    yield
    stub.reset()


def create(phttp, org, intent):
    return phttp.post("/v1/personas", json={"intent": intent}, headers=org.auth)


def events(phttp, org, **params) -> list[dict]:
    r = phttp.get("/v1/events", params={"limit": 100, **params}, headers=org.auth)
    assert r.status_code == 200, r.text
    return r.json().get("items", [])


def audit_entries(phttp, org, **params) -> list[dict]:
    r = phttp.get("/v1/audit/events", params={"limit": 100, "action": "provider.call", **params}, headers=org.auth)
    assert r.status_code == 200, r.text
    return r.json().get("items", [])


def assert_no_upstream_leak(response: httpx.Response) -> None:
    body = response.text
    for secret in (SECRET_MESSAGE, "xyzzy", "orion", SECRET_CODE, "server_error"):
        assert secret not in body, body
    for header, value in response.headers.items():
        assert "xyzzy" not in value and SECRET_CODE not in value, (header, value)


def test_the_stub_backed_stack_generates(phttp, org, stub):
    r = create(phttp, org, "A jolly lighthouse keeper who loves jazz")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "active"
    paths = {req.path for req in stub.requests}
    assert {"/v1/moderations", "/v1/chat/completions", "/v1/embeddings"} <= paths


def test_errors_beyond_the_retries_are_a_502_without_upstream_details(phttp, org, stub):
    before = {e["id"] for e in audit_entries(phttp, org)}
    stub.inject_error(times=ATTEMPTS, status=500, envelope=UPSTREAM, path="/moderations")
    r = create(phttp, org, "A nervous wizard who collects teacups")
    assert_envelope(r, 502, "provider_error")
    assert_no_upstream_leak(r)
    assert len(stub.requests_to("/moderations")) == ATTEMPTS
    assert not stub.requests_to("/chat/completions"), "the run must stop at the failed step"

    # The failed run is an event.
    failed = events(phttp, org, type="generation.run.failed")
    assert failed, "no generation.run.failed event"
    latest = failed[0]
    assert latest["data"]["errorCode"] == "provider_error" and latest["data"]["kind"] == "create"
    run_events = events(phttp, org, personaId=latest["data"]["personaId"])
    assert [e["type"] for e in run_events] == ["generation.run.failed", "generation.run.started"]
    assert_envelope(phttp.get(f"/v1/personas/{latest['data']['personaId']}", headers=org.auth), 404, "not_found")

    # Every failed attempt is in the audit log, upstream envelope under details.upstream.
    fresh = [e for e in audit_entries(phttp, org) if e["id"] not in before]
    assert len(fresh) == ATTEMPTS, fresh
    for entry in fresh:
        assert entry["action"] == "provider.call"
        assert entry["outcome"] == "failure"
        details = entry["details"]
        assert details["upstream"] == UPSTREAM
        assert details["upstreamStatus"] == 500
        assert details["operation"] == "moderate"
    assert sorted(e["details"]["attempt"] for e in fresh) == list(range(1, ATTEMPTS + 1))
    assert {e["requestId"] for e in fresh} == {r.headers["x-request-id"]}
    assert {e["errorCode"] for e in fresh} == {"provider_error"} and {e["status"] for e in fresh} == {502}
    # Callers of the audit API may see the envelope; callers of the persona API never do.
    assert SECRET_MESSAGE in json.dumps(fresh)


def test_a_malformed_body_beyond_the_retries_is_a_502(phttp, org, stub):
    stub.inject_malformed(times=ATTEMPTS, body="{not json at all xyzzy", path="/embeddings")
    r = create(phttp, org, "A gentle blacksmith who paints watercolours")
    assert_envelope(r, 502, "provider_error")
    assert "xyzzy" not in r.text and "not json" not in r.text


def test_timeouts_beyond_the_retries_are_a_504(phttp, org, stub):
    stub.inject_delay(times=ATTEMPTS, seconds=1.6, path="/moderations")
    r = create(phttp, org, "A sarcastic robot who runs a flower shop")
    assert_envelope(r, 504, "provider_timeout")
    assert "Timeout" not in r.text and "httpx" not in r.text
    assert len(stub.requests_to("/moderations")) == ATTEMPTS
    failed = events(phttp, org, type="generation.run.failed")
    assert failed[0]["data"]["errorCode"] == "provider_timeout"


def test_a_transient_error_is_retried_to_success(phttp, org, stub):
    before = {e["id"] for e in audit_entries(phttp, org)}
    stub.inject_error(times=1, status=500, envelope=UPSTREAM, path="/chat/completions")
    r = create(phttp, org, "A tireless courier who knows every alley in Lisbon")
    assert r.status_code == 200, r.text
    persona = r.json()
    assert persona["state"] == "active"
    types = [e["type"] for e in events(phttp, org, personaId=persona["id"])]
    assert types == ["persona.created", "generation.run.completed", "generation.run.started"]
    fresh = [e for e in audit_entries(phttp, org) if e["id"] not in before]
    assert len(fresh) == 1 and fresh[0]["details"]["upstream"] == UPSTREAM
    assert fresh[0]["details"]["attempt"] == 1


def test_sse_delivers_progress_before_a_slow_step_finishes(pstack, org, stub):
    """A slow fingerprint (embeddings) step: the early events reach the client
    long before the stream ends."""
    import time

    stub.inject_delay(times=1, seconds=0.8, path="/embeddings")
    arrivals = []
    with httpx.Client(base_url=pstack.http_url, timeout=30) as client:
        with client.stream("POST", "/v1/personas", params={"stream": "true"},
                           json={"intent": "A careful archivist who hums sea shanties"}, headers=org.auth) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].split(";")[0] == "text/event-stream"
            for event in sse_events(r.iter_lines()):
                arrivals.append((time.monotonic(), event))
    names = [(e["event"], e.get("step", "")) for _, e in arrivals]
    assert names[0] == ("run.started", "") and names[-1][0] == "persona"
    started_fp = next(t for t, e in arrivals if e["event"] == "step.started" and e["step"] == "fingerprint")
    assert arrivals[-1][0] - arrivals[0][0] >= 0.6
    assert arrivals[-1][0] - started_fp >= 0.6, "step.started(fingerprint) was held back until the end"


# --- chat replies through the same failing upstream --------------------------------


def _chat_session(phttp, org) -> str:
    persona = create(phttp, org, "A calm librarian who recommends mysteries")
    assert persona.status_code == 200, persona.text
    r = phttp.post(
        "/v1/chat/sessions", headers=org.auth, json={"personaId": persona.json()["id"], "userId": "reader-1"}
    )
    assert r.status_code == 200, r.text
    return r.json()["sessionId"]


def test_chat_reply_provider_error_is_502_without_leak_and_audited(phttp, org, stub):
    session_id = _chat_session(phttp, org)
    before = len(audit_entries(phttp, org))
    stub.inject_error(times=ATTEMPTS, status=500, envelope=UPSTREAM, path="/chat/completions")
    r = phttp.post(f"/v1/chat/sessions/{session_id}/messages", headers=org.auth, json={"content": "Any tips?"})
    assert_envelope(r, 502, "provider_error")
    assert_no_upstream_leak(r)
    entries = audit_entries(phttp, org)
    assert len(entries) - before == ATTEMPTS
    assert entries[0]["details"]["upstream"] == UPSTREAM
    session = phttp.get(f"/v1/chat/sessions/{session_id}", headers=org.auth).json()
    assert session["messageCount"] == 0 and session["inputTokens"] == 0  # nothing billed for a failed reply


def test_chat_reply_transient_failure_is_retried(phttp, org, stub):
    session_id = _chat_session(phttp, org)
    stub.inject_error(times=1, status=500, envelope=UPSTREAM, path="/chat/completions")
    r = phttp.post(f"/v1/chat/sessions/{session_id}/messages", headers=org.auth, json={"content": "Hello there"})
    assert r.status_code == 200, r.text


def test_chat_reply_timeout_is_504(phttp, org, stub):
    session_id = _chat_session(phttp, org)
    stub.inject_delay(times=ATTEMPTS, seconds=1.6, path="/chat/completions")
    r = phttp.post(f"/v1/chat/sessions/{session_id}/messages", headers=org.auth, json={"content": "Still there?"})
    assert_envelope(r, 504, "provider_timeout")


def _arrivals(client, method_path: str, body: dict, auth: dict, params: dict | None = None):
    import time

    arrivals = []
    with client.stream("POST", method_path, params=params, json=body, headers=auth) as r:
        assert r.status_code == 200
        for event in sse_stream(r.iter_lines()):
            arrivals.append((time.monotonic(), event))
    return arrivals


def test_streamed_text_reaches_the_client_as_the_provider_produces_it(pstack, phttp, org, stub):
    """The upstream pauses 0.8 s after its first sentence: that chunk's text is
    already at the client long before the reply ends (chat and completions)."""
    session_id = _chat_session(phttp, org)
    persona_id = phttp.get(f"/v1/chat/sessions/{session_id}", headers=org.auth).json()["personaId"]
    with httpx.Client(base_url=pstack.http_url, timeout=30) as client:
        stub.inject_delay(times=1, seconds=0.8, path="/chat/completions", mid_stream=True)
        chat = _arrivals(client, f"/v1/chat/sessions/{session_id}/messages", {"content": "Tell me about tides"},
                         org.auth, params={"stream": "true"})
        first_text = next(t for t, e in chat if e.event == "message.delta")
        assert chat[-1][1].event == "end" and chat[-1][0] - first_text >= 0.5, "the text was held back"

        stub.inject_delay(times=1, seconds=0.8, path="/chat/completions", mid_stream=True)
        body = {"model": f"persona://{persona_id}", "messages": [{"role": "user", "content": "Tides?"}],
                "stream": True}
        completion = _arrivals(client, "/v1/chat/completions", body, org.auth)
        first_text = next(t for t, e in completion if '"content":"' in e.data and '"content":""' not in e.data)
        assert completion[-1][1].data == "[DONE]" and completion[-1][0] - first_text >= 0.5


# -- a model's answer of any shape (an oracle over answers nobody listed: tests/json_shapes.py) -------------------

ANSWER_SHAPES = (None, 7, "text", [7], {"value": 7})


def _answers(stub: OpenAIStub, phttp: httpx.Client, org) -> dict[str, dict]:
    """What the model answers each step of a create, as JSON (the local model's, through the stub)."""
    from providers.openai_stub import guess_task, local_responder

    seen: dict[str, dict] = {}

    def recording(body):
        done = local_responder(body)
        if guess_task(body) != "reply":
            seen.setdefault(guess_task(body), json.loads(done.text))
        return done

    stub.responder = recording
    assert phttp.post("/v1/personas", json={"intent": "A tidy archivist of lost maps"}, headers=org.auth).is_success
    stub.reset()
    return seen


def _answering(task: str, place: tuple, value):
    from dataclasses import replace

    from json_shapes import with_value
    from providers.openai_stub import guess_task, local_responder

    def responder(body):
        done = local_responder(body)
        if guess_task(body) != task:
            return done
        return replace(done, text=json.dumps(with_value(json.loads(done.text), place, value)))

    return responder


@pytest.mark.parametrize("task", ["soul", "voice", "audit"])
def test_any_json_in_a_models_answer_is_a_persona_or_its_failure(phttp, org, stub, task):
    """Each place of a step's JSON answer (a list's first item, nested) replaced by each JSON type: the create
    succeeds with every field of the contract's type, or fails as a 502 `provider_error` naming the reply's
    problem (`reply_not_json`); never a 500, never a value turned into text (`{'value': 7}` as a name, a string's
    letters as traits)."""
    from json_shapes import places

    answer = _answers(stub, phttp, org)[task]
    wrong = []
    for place in [p for p in places(answer) if all(k == 0 for k in p if isinstance(k, int))]:
        for value in ANSWER_SHAPES:
            stub.responder = _answering(task, place, value)
            r = phttp.post("/v1/personas", json={"intent": "A tidy archivist of lost maps"}, headers=org.auth)
            what = f"{task} {'/'.join(map(str, place))} = {value!r}: {r.status_code} {r.text[:200]}"
            if r.status_code == 502:
                if r.json()["error"]["details"].get("reason") != "reply_not_json":
                    wrong.append(what)
                continue
            if r.status_code != 200:
                wrong.append(what)
                continue
            soul = r.json()["soul"]
            voice = phttp.get(f"/v1/personas/{r.json()['id']}/voice", headers=org.auth).json()
            texts = [soul.get(k, "") for k in ("name", "desire", "fear", "backstory", "speakingStyle")]
            texts += [voice.get("systemPrompt", ""), voice.get("greeting", "")]
            texts += [d.get(k, "") for d in voice.get("sampleDialogues", []) for k in ("user", "persona")]
            lists = [soul.get("traits", []), soul.get("values", [])]
            if any(not isinstance(t, str) or t.startswith(("{'", "[")) or t in ("7", "None") for t in texts) or any(
                    not isinstance(items, list) or any(len(i) < 2 for i in items) for items in lists):
                wrong.append(what + f" stored {str(soul)[:300]} / {str(voice)[:300]}")
    assert not wrong, f"{len(wrong)} answers mishandled:\n" + "\n".join(wrong[:30])


def test_a_soul_whose_traits_are_a_string_fails_naming_them(phttp, org, stub):
    """(A small model's usual slip: `"traits": "dry, loyal"`.) The run fails saying which field, not a persona
    whose traits are the string's letters."""
    stub.responder = _answering("soul", ("traits",), "dry, loyal")
    r = phttp.post("/v1/personas", json={"intent": "A tidy archivist of lost maps"}, headers=org.auth)
    error = assert_envelope(r, 502, "provider_error")
    assert error["details"]["reason"] == "reply_not_json"
    assert error["details"]["upstreamMessage"] == "the reply's `traits` was not a list of texts"
