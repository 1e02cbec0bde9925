"""Every request field that carries free JSON (a `google.protobuf.Struct`, `Value` or `ListValue` anywhere in an
RPC's request: metadata, a config value, a card's extensions, the OpenAI surface's content, tools, stop...), and
every place around it, replaced by each JSON type (tests/json_shapes.py): the answer is the envelope or a
success, never a 5xx. Through Envoy, as clients call.

Which RPCs and fields are read from the protos' descriptors: each must have a seed body below in which every
one of its free-JSON fields is present (so each is replaced), or the first test fails: a free-JSON field added
to a request is covered or noticed, never left out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.api import annotations_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from json_shapes import as_text, places, shaped, strings
from oracle import contract

FREE = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def _completion(persona_id: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    return {"model": f"persona://{persona_id}", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
                {"role": "assistant", "content": None, "tool_calls": [call], "refusal": None, "annotations": [],
                 "audio": None, "function_call": None},
                {"role": "tool", "tool_call_id": "call_1", "content": "Rain."}],
            "tools": [{"type": "function", "function": WEATHER}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "stop": ["END"], "response_format": {"type": "text"}, "metadata": {"team": "a"},
            "logit_bias": {"50256": -100}, "max_tokens": 16, "user": "u-1", "audio": None,
            "prediction": {"type": "content", "content": "Rain"}, "web_search_options": {},
            "functions": [WEATHER], "function_call": {"name": "get_weather"}}


def _persona(persona_id: str) -> dict[str, Any]:
    return {"intent": "A lighthouse keeper who loves jazz", "metadata": {"campaign": "autumn", "n": [1, {"x": True}]}}


# RPC -> its seed body (given a persona's id); its path's parameters come from PARAMS.
SEEDS: dict[str, Callable[[str], dict[str, Any]]] = {
    "OpenAIService.CreateChatCompletion": _completion,
    "OpenAIService.StreamChatCompletion": lambda p: {**_completion(p), "stream": True},
    "PersonaService.CreatePersona": _persona,
    "PersonaService.StreamCreatePersona": _persona,
    "PersonaService.PreviewPersona": _persona,
    "PersonaService.UpdatePersona": lambda p: {"metadata": {"campaign": "autumn", "n": [1]}, "displayName": "Keeper"},
    "ConfigService.UpdateConfigItem": lambda p: {"value": 0.5, "level": "persona", "personaId": p},
    "PersonaService.ImportPersonaCard": lambda p: {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Mirela", "description": "An airship captain.", "extensions": {
            "depth_prompt": {"depth": 4}, "persona-service": {
                "intent": "An airship captain who smuggles books", "visibility": "org", "metadata": {"a": 1},
                "soul": {"name": "Mirela", "desire": "To keep the books flying", "traits": ["dry"]}}}}},
}
PARAMS = {"key": "engine.pipeline.drift_detection.threshold"}  # (a key a persona may set)


def _free_fields(message: Descriptor, at: str = "", seen: frozenset[str] = frozenset()) -> Iterator[str]:
    """The JSON paths (repeated fields' items not counted) of the message's free-JSON fields, nested."""
    for field in message.fields:
        kind = field.message_type
        if kind is None or kind.full_name in seen:
            continue
        if kind.full_name in FREE:
            yield at + field.json_name
        elif not kind.full_name.startswith("google.") and field.type == FieldDescriptor.TYPE_MESSAGE:
            yield from _free_fields(kind, f"{at}{field.json_name}.", seen | {message.full_name})


def _rpcs() -> dict[str, tuple[str, str, set[str]]]:
    """RPC -> (HTTP verb, path, free-JSON fields as the body names them) for every RPC with a free-JSON field."""
    found = {}
    for file in contract()._persona_files():
        for service in file.services_by_name.values():
            for method in service.methods:
                free = set(_free_fields(method.input_type))
                if not free:
                    continue
                http = method.GetOptions().Extensions[annotations_pb2.http]
                verb = http.WhichOneof("pattern") or ""
                body = "" if http.body in ("", "*") else http.body + "."  # a body of one field starts below it
                found[f"{service.name}.{method.name}"] = (
                    verb.upper(), getattr(http, verb), {f.removeprefix(body) for f in free})
    return found


def _named(doc: Any) -> set[str]:
    """The places of a body as field paths (items of lists not counted)."""
    return {".".join(str(k) for k in place if not isinstance(k, int)) for place in places(doc)}


def test_every_free_json_field_has_a_seed():
    rpcs = _rpcs()
    assert set(SEEDS) == set(rpcs), "each RPC with a free-JSON field needs a seed (and only those)"
    for name, (_, _, free) in rpcs.items():
        missing = free - _named(SEEDS[name]("p"))
        assert not missing, f"{name}'s seed lacks {sorted(missing)}"


@pytest.fixture(scope="module")
def tenant(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def persona_id(http, tenant) -> str:
    r = http.post("/v1/personas", json={"intent": "A grumpy lighthouse keeper who loves jazz"}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


@pytest.mark.parametrize("rpc", sorted(SEEDS))
def test_any_json_in_place_of_a_value_is_never_a_server_error(http, tenant, persona_id, rpc):
    verb, template, _ = _rpcs()[rpc]
    path = re.sub(r"\{(\w+)\}", lambda m: PARAMS.get(m.group(1), persona_id), template)
    failed = []
    for what, value, sent in shaped(SEEDS[rpc](persona_id)):
        r = http.request(verb, path, json=sent, headers=tenant.auth)
        if r.status_code >= 500 or "internal_error" in r.text:  # (a stream's error comes in its events)
            failed.append(f"{verb} {path} {what}: {r.status_code} {r.text[:300]}")
        elif r.is_success and r.headers["content-type"].startswith("application/json") and (
                turned := as_text(value) & set(strings(r.json()))):
            failed.append(f"{verb} {path} {what}: kept as text {turned}: {r.text[:300]}")
    assert not failed, f"{len(failed)} server errors:\n" + "\n".join(failed[:40])
