"""The OpenAI-compatible surface through Envoy (mirrors
server/persona_service/domain/completions.py and the edge's Lua routing):
the official `openai` package lists and retrieves models, chats, streams
and calls tools (whole and streamed); raw HTTP checks the exact wire shapes
(every SSE `data:` line JSON but the final `[DONE]`), raw and encoded model
ids, error envelopes, accounting, drift and moderation, and tenant
isolation."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import openai
import pytest
from support import assert_envelope

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def setup(http, tenants):
    tenant = tenants()
    r = http.post("/v1/personas", json={"intent": "A grumpy lighthouse keeper who loves jazz"}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return tenant, r.json()["id"]


@pytest.fixture(scope="module")
def client(stack, setup):
    tenant, _ = setup
    with openai.OpenAI(base_url=stack.http_url + "/v1", api_key=tenant.api_key, max_retries=0, timeout=30) as c:
        yield c


def test_list_and_retrieve_models(client, setup):
    tenant, persona_id = setup
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == [f"persona://{persona_id}"]
    model = models.data[0]
    assert model.object == "model" and model.owned_by == tenant.org_id and isinstance(model.created, int)
    one = client.models.retrieve(f"persona://{persona_id}")
    assert one.id == f"persona://{persona_id}" and one.created == model.created


def test_model_ids_raw_and_encoded(http, setup):
    tenant, persona_id = setup
    raw = http.get(f"/v1/models/persona://{persona_id}", headers=tenant.auth)
    encoded = http.get(f"/v1/models/{quote('persona://' + persona_id, safe='')}", headers=tenant.auth)
    for r in (raw, encoded):
        assert r.status_code == 200, r.text
        assert r.json() == {"id": f"persona://{persona_id}", "object": "model", "created": raw.json()["created"],
                            "owned_by": tenant.org_id}
    listed = http.get("/v1/models", headers=tenant.auth).json()
    assert listed["object"] == "list" and listed["data"] == [raw.json()]
    missing = http.get("/v1/models/persona://00000000-0000-4000-8000-000000000000", headers=tenant.auth)
    assert_envelope(missing, 404, "model_not_found")
    assert_envelope(http.get("/v1/models/gpt-4o", headers=tenant.auth), 404, "model_not_found")


def test_chat_completion(client, setup, http):
    tenant, persona_id = setup
    completion = client.chat.completions.create(
        model=f"persona://{persona_id}", messages=[{"role": "user", "content": "Hello, who are you?"}],
        temperature=0.2, user="end-user-42",
    )
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == f"persona://{persona_id}"
    choice = completion.choices[0]
    assert choice.index == 0 and choice.finish_reason == "stop"
    assert choice.message.role == "assistant" and choice.message.content
    usage = completion.usage
    assert usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # Accounted in the user's completions session.
    sessions = http.get("/v1/chat/sessions", params={"userId": "end-user-42"}, headers=tenant.auth).json()["items"]
    assert len(sessions) == 1
    assert sessions[0]["title"] == "chat.completions" and sessions[0]["messageCount"] == 2
    assert sessions[0]["inputTokens"] == usage.prompt_tokens and sessions[0]["outputTokens"] == usage.completion_tokens
    client.chat.completions.create(model=f"persona://{persona_id}", messages=[{"role": "user", "content": "Again"}],
                                   user="end-user-42")
    again = http.get("/v1/chat/sessions", params={"userId": "end-user-42"}, headers=tenant.auth).json()["items"]
    assert len(again) == 1 and again[0]["messageCount"] == 4


def test_exact_unary_shape(http, setup):
    tenant, persona_id = setup
    r = http.post("/v1/chat/completions", headers=tenant.auth, json={
        "model": f"persona://{persona_id}", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_tokens": 5, "n": 1,
    })
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"}
    assert isinstance(body["created"], int) and isinstance(body["usage"]["prompt_tokens"], int)
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and choice["logprobs"] is None
    assert choice["message"]["refusal"] is None and isinstance(choice["message"]["content"], str)
    assert body["usage"]["completion_tokens"] <= 5


def test_streaming(client, setup):
    _, persona_id = setup
    stream = client.chat.completions.create(
        model=f"persona://{persona_id}", messages=[{"role": "user", "content": "Tell me about the sea"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"] and text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    whole = client.chat.completions.create(model=f"persona://{persona_id}",
                                           messages=[{"role": "user", "content": "Tell me about the sea"}])
    assert whole.choices[0].message.content == text


def test_sse_framing_through_envoy(stack, setup):
    tenant, persona_id = setup
    body = {"model": f"persona://{persona_id}", "messages": [{"role": "user", "content": "Hello"}], "stream": True}
    with httpx.Client(base_url=stack.http_url, timeout=30) as c:
        with c.stream("POST", "/v1/chat/completions", json=body, headers=tenant.auth) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            payload = r.read().decode()
    lines = [line for line in payload.split("\n") if line and not line.startswith("id: run_")]
    assert all(line.startswith("data: ") for line in lines), lines
    # OpenAI framing: `id:` lines for Last-Event-ID, no `event:` (OpenAI clients read any event as another kind).
    ids = [line for line in payload.split("\n") if line.startswith("id: ")]
    assert len(ids) == len(lines) and ids[0].startswith("id: run_") and ids[-1].endswith(f".{len(lines)}")
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        chunk = json.loads(line[len("data: "):])
        assert chunk["object"] == "chat.completion.chunk" and "usage" not in chunk
    # A message whose text merely mentions "stream": true is not streamed.
    tricky = {"model": f"persona://{persona_id}",
              "messages": [{"role": "user", "content": 'set "stream": true please'}]}
    r = httpx.post(stack.http_url + "/v1/chat/completions", json=tricky, headers=tenant.auth, timeout=30)
    assert r.status_code == 200 and r.json()["object"] == "chat.completion"


# JSON Schema allows `true` as a property's schema: `"stream": true` inside a tool.
PLAY_TOOL = {"type": "function", "function": {"name": "play", "parameters": {
    "type": "object", "properties": {"stream": True, "volume": {"type": "number"}}}}}


@pytest.mark.parametrize(("members", "streamed"), [
    # A tool whose JSON schema has a property named "stream" is not a streaming request.
    ('"tools": ' + json.dumps([PLAY_TOOL]), False),
    ('"stream": false, "user": "\\"stream\\": true"', False),
    ('"stream" : true', True),
    ('"stream": true, "stream": false', False),  # the last member wins, as in the server's parser
])
def test_streaming_is_decided_from_the_requests_own_member(stack, setup, members, streamed):
    tenant, persona_id = setup
    head = json.dumps({"model": f"persona://{persona_id}", "messages": [{"role": "user", "content": "Hello"}]})
    raw = head[:-1] + ", " + members + "}"
    r = httpx.post(stack.http_url + "/v1/chat/completions", content=raw, timeout=30,
                   headers={**tenant.auth, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    if streamed:
        assert r.headers["content-type"].startswith("text/event-stream")
    else:
        assert r.headers["content-type"] == "application/json" and r.json()["object"] == "chat.completion"


def test_tool_call_whole_and_streamed(client, setup):
    _, persona_id = setup
    messages = [{"role": "user", "content": "What is the weather in Lisbon? [[tool:get_weather]]"}]
    completion = client.chat.completions.create(model=f"persona://{persona_id}", messages=messages,
                                                tools=[WEATHER_TOOL], tool_choice="auto")
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    assert json.loads(call.function.arguments)["city"]
    # Streamed: the same call, in fragments.
    stream = client.chat.completions.create(model=f"persona://{persona_id}", messages=messages, tools=[WEATHER_TOOL],
                                            stream=True)
    calls: dict[int, dict] = {}
    finish = None
    for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] = entry["id"] or tc.id or ""
            entry["name"] = entry["name"] or (tc.function.name or "")
            entry["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert calls == {0: {"id": call.id, "name": "get_weather", "arguments": call.function.arguments}}
    # The tool result goes back; the persona reports it.
    follow = client.chat.completions.create(model=f"persona://{persona_id}", tools=[WEATHER_TOOL], messages=[
        *messages,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 degrees"},
    ])
    assert "Sunny" in follow.choices[0].message.content


def test_errors_keep_the_envelope(client, setup, http):
    tenant, persona_id = setup
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="persona://00000000-0000-4000-8000-000000000000",
                                       messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as info:  # OpenAI answers a refused content 400
        client.chat.completions.create(model=f"persona://{persona_id}",
                                       messages=[{"role": "user", "content": "[[unsafe]] go"}])
    assert info.value.body["code"] == "moderation_blocked"
    with pytest.raises(openai.ConflictError) as info:
        client.chat.completions.create(model=f"persona://{persona_id}",
                                       messages=[{"role": "user", "content": "[[drift]] go"}])
    assert info.value.body["code"] == "drift_blocked"
    # Streamed: the refusal arrives in-band after the first chunk; the client raises.
    with pytest.raises(openai.APIError) as info:
        list(client.chat.completions.create(model=f"persona://{persona_id}", stream=True,
                                            messages=[{"role": "user", "content": "[[unsafe]] go"}]))
    assert (info.value.code, info.value.type) == ("moderation_blocked", "invalid_request_error")
    r = http.post("/v1/chat/completions", json={"model": f"persona://{persona_id}", "messages": []},
                  headers=tenant.auth)
    assert_envelope(r, 400, "validation_failed")
    r = http.post("/v1/chat/completions", json={"model": f"persona://{persona_id}",
                                                "messages": [{"role": "wizard", "content": "x"}]}, headers=tenant.auth)
    assert_envelope(r, 400, "validation_failed")
    assert_envelope(http.get("/v1/models", headers={"Authorization": "Bearer sk_live_nope"}), 401, "unauthorized")
    events = http.get("/v1/events", params={"personaId": persona_id, "type": "persona.audit_failed"},
                      headers=tenant.auth).json()["items"]
    assert any(e["data"]["reason"] == "voice_drift" and e["data"]["subjectType"] == "chat_completion" for e in events)


def test_errors_carry_openai_type_and_param(client, setup, http):
    """OpenAI's client shows `type` and `param`; the message names the first field and its rule, the
    details keep every violation."""
    _, persona_id = setup
    with pytest.raises(openai.BadRequestError) as info:  # OpenAI's 400, not 422
        client.chat.completions.create(model=f"persona://{persona_id}", temperature=3, max_tokens=0,
                                       messages=[{"role": "user", "content": "hi"}])
    error = info.value
    assert (error.type, error.param, error.code) == ("invalid_request_error", "temperature", "validation_failed")
    assert error.body["message"] == "`temperature` must be at most 2. (1 more in `details.validationErrors`.)"
    assert [v["path"] for v in error.body["details"]["validationErrors"]] == ["temperature", "max_tokens"]
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("gpt-4o")
    assert (info.value.type, info.value.param, info.value.code) == ("invalid_request_error", None, "model_not_found")
    with openai.OpenAI(base_url=client.base_url, api_key="sk_live_nope", max_retries=0) as stranger:
        with pytest.raises(openai.AuthenticationError) as info:
            stranger.models.list()
    assert info.value.type == "authentication_error"
    # The edge's own answers there are in the same shape.
    r = http.post("/v1/chat/completions", content=b"{not json", headers={**setup[0].auth,
                                                                         "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text


def test_models_are_tenant_scoped(stack, http, tenants, setup):
    _, persona_id = setup
    other = tenants()
    assert http.get("/v1/models", headers=other.auth).json() == {"object": "list", "data": []}
    assert_envelope(http.get(f"/v1/models/persona://{persona_id}", headers=other.auth), 404, "model_not_found")
    with openai.OpenAI(base_url=stack.http_url + "/v1", api_key=other.api_key, max_retries=0) as c:
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model=f"persona://{persona_id}", messages=[{"role": "user", "content": "hi"}])


def test_an_unknown_model_is_openais_model_not_found(client, setup, http):
    """OpenAI's answer, status, type and code alike: 404 `model_not_found`, `invalid_request_error`."""
    tenant, _ = setup
    r = http.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                  headers=tenant.auth)
    error = assert_envelope(r, 404, "model_not_found")
    assert error["type"] == "invalid_request_error" and error["param"] is None
    assert error["message"] == "The model `gpt-4o` does not exist or you do not have access to it."
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="persona://00000000-0000-4000-8000-000000000000", stream=True,
                                       messages=[{"role": "user", "content": "hi"}])
    assert (info.value.code, info.value.type) == ("model_not_found", "invalid_request_error")


@pytest.mark.parametrize(("messages", "tools", "path", "rule"), [
    ([{"role": "user"}], None, "messages[0].content", "required"),
    ([{"role": "user", "content": None}], None, "messages[0].content", "required"),
    ([{"role": "system", "content": "Be brief"}, {"role": "user"}], None, "messages[1].content", "required"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant"}, {"role": "user", "content": "and?"}], None,
     "messages[1].content", "required"),
    ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "24 degrees"}], None,
     "messages[1].tool_call_id", "required"),
    ([{"role": "user", "content": "hi"}], [{**WEATHER_TOOL, "function": {**WEATHER_TOOL["function"],
                                                                         "name": "get weather"}}],
     "tools[0].function.name", "format"),
    ([{"role": "user", "content": "hi"}], [{"type": "function", "function": {"description": "no name"}}],
     "tools[0].function.name", "required"),
    ([{"role": "user", "content": 7}], None, "messages[0].content", "type"),
    ([{"role": "user", "content": ["hi"]}], None, "messages[0].content[0]", "type"),
    ([{"role": "user", "content": [{"type": "text", "text": 7}]}], None, "messages[0].content[0].text", "type"),
    ([{"role": "user", "content": [{"type": "text"}]}], None, "messages[0].content[0].text", "type"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_what_openai_refuses_is_a_bad_request(client, setup, messages, tools, path, rule, stream):
    """A message without content (only an assistant's with tool calls may have none), content neither a string
    nor an array of parts (a text part's text a string), a tool message answering no call, a function name OpenAI
    refuses (letters, digits, `_`, `-`): 400, `BadRequestError`, naming it."""
    _, persona_id = setup
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=f"persona://{persona_id}", messages=messages, stream=stream,
                                       **({"tools": tools} if tools else {}))
    error = info.value
    assert (error.status_code, error.code, error.type, error.param) == (
        400, "validation_failed", "invalid_request_error", path), error.body
    assert [(v["path"], v["code"]) for v in error.body["details"]["validationErrors"]] == [(path, rule)]
    assert error.body["message"].startswith(f"`{path}` ")


def test_an_assistant_message_with_tool_calls_needs_no_content(client, setup):
    _, persona_id = setup
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    reply = client.chat.completions.create(model=f"persona://{persona_id}", tools=[WEATHER_TOOL], messages=[
        {"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}])
    assert reply.choices[0].message.content


def test_the_docs_openai_client_snippet_runs_as_it_is(stack, setup):
    """docs/sdks.md, "OpenAI's own client": pasted as is, with the variables it names."""
    import os
    import re
    import subprocess
    import sys

    from support import ROOT

    section = (ROOT / "docs" / "sdks.md").read_text(encoding="utf-8").split("\n## OpenAI's own client\n", 1)[1]
    snippet = re.search(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert snippet, "docs/sdks.md shows no openai client"
    tenant, persona_id = setup
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_", "OPENAI_"))}
    env |= {"PERSONA_API_KEY": tenant.api_key, "PERSONA_ID": persona_id,
            "PERSONA_HTTP_PORT": str(stack.settings.http_port)}
    result = subprocess.run([sys.executable, "-c", snippet.group(1)], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert f"persona://{persona_id}" in first and "".join(rest).strip(), result.stdout
