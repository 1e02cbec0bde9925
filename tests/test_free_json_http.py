"""Every request field that carries free JSON (`google.protobuf.Struct`/`Value` in the protos: metadata, a
config value, a card's extensions, the OpenAI surface's tools, stop, response format...), and every place
around it, replaced by each JSON type (tests/json_shapes.py): the answer is the envelope or a success, never a
5xx. Through Envoy, as clients call."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from json_shapes import variants

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def tenant(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def persona_id(http, tenant) -> str:
    r = http.post("/v1/personas", json={"intent": "A grumpy lighthouse keeper who loves jazz"}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


def _never_a_server_error(http: Any, tenant: Any, method: str, path: str, body: dict[str, Any]) -> None:
    failed = []
    for what, sent in variants(body):
        r = http.request(method, path, json=sent, headers=tenant.auth)
        if r.status_code >= 500 or "internal_error" in r.text:  # (a stream's error comes in its events)
            failed.append(f"{method} {path} {what}: {r.status_code} {r.text[:300]}")
    assert not failed, f"{len(failed)} server errors:\n" + "\n".join(failed[:40])


def test_completions(http, tenant, persona_id):
    body = {"model": f"persona://{persona_id}", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Rain."}],
            "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "stop": ["END"], "response_format": {"type": "text"}, "metadata": {"team": "a"},
            "logit_bias": {"50256": -100}, "max_tokens": 16, "user": "u-1",
            "prediction": {"type": "content", "content": "Rain"}, "web_search_options": {},
            "functions": [WEATHER_TOOL["function"]], "function_call": {"name": "get_weather"}}
    _never_a_server_error(http, tenant, "POST", "/v1/chat/completions", body)
    _never_a_server_error(http, tenant, "POST", "/v1/chat/completions:stream", {**body, "stream": True})


def test_persona_metadata_and_soul(http, tenant, persona_id):
    _never_a_server_error(http, tenant, "PATCH", f"/v1/personas/{persona_id}",
                          {"metadata": {"campaign": "autumn", "n": [1, {"x": True}]}, "displayName": "Keeper"})


def test_config_values(http, tenant, persona_id):
    for key, value in (("engine.pipeline.audit.threshold", 0.5), ("engine.pipeline.audit.blocking", False),
                       ("engine.pipeline.drift_detection.action_on_alert", "block")):
        _never_a_server_error(http, tenant, "PUT", f"/v1/config/{key}", {"value": value, "level": "workspace"})
        _never_a_server_error(http, tenant, "PUT", f"/v1/config/{key}",
                              {"value": value, "level": "persona", "personaId": persona_id})


def test_card_import(http, tenant, persona_id):
    card = http.get(f"/v1/personas/{persona_id}/card", headers=tenant.auth).json()
    card = copy.deepcopy(card)
    _never_a_server_error(http, tenant, "POST", "/v1/personas/import", card)
