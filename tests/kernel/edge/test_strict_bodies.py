"""Unknown JSON body fields are refused by name (400 `bad_request`, as an
unknown query parameter is), at every nesting level of the request message,
but never inside free-form values (Struct, Value, maps); the edge's list of a
body's keys cannot be forged (kernel/transport/body_keys.py, edge/envelope.lua)."""

from __future__ import annotations

import json
import re

import pytest
from persona.v1 import keys_pb2, keys_pb2_grpc
from persona_service.kernel.transport import body_keys
from persona_service.kernel.transport.policy import find_services
from persona_service.process import edge
from support import assert_envelope

INTENT = "A grumpy lighthouse keeper who loves jazz"
SCOPES = ["personas:read"]
WEBHOOK = {"url": "http://127.0.0.1:9/hook", "events": ["*"]}
CHAT = {"model": "persona://00000000-0000-4000-8000-000000000000", "messages": [{"role": "user", "content": "Hi"}]}


def _unknown(response, *paths: str) -> dict:
    error = assert_envelope(response, 400, "bad_request")
    assert error["details"] == {"reason": "unknown_fields", "unknownFields": list(paths)}, error
    for path in paths:
        assert f'"{path}"' in error["message"]
    return error


@pytest.mark.parametrize(("method", "path", "body", "unknown"), [
    # A typo at the top level (the contract issue's own example).
    ("POST", "/v1/personas", {"intent": INTENT, "visiblity": "public"}, ["visiblity"]),
    ("POST", "/v1/keys", {"name": "k", "scopes": SCOPES, "expiresAtt": "2030-01-01T00:00:00Z"}, ["expiresAtt"]),
    ("POST", "/v1/webhooks", {**WEBHOOK, "secrett": "x"}, ["secrett"]),
    ("PATCH", "/v1/webhooks/whk_missing", {"descripton": "x"}, ["descripton"]),  # refused before the lookup
    ("PUT", "/v1/config/persona.default_visibility", {"value": "private", "vlaue": "x"}, ["vlaue"]),
    # Nested in a sub-message, and inside a repeated message's elements.
    ("POST", "/v1/personas", {"intent": INTENT, "soul": {"desir": "x" * 20}}, ["soul.desir"]),
    ("POST", "/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "Hi"},
                                                           {"role": "user", "content": "Hi", "nmae": "x"}]},
     ["messages[].nmae"]),
    ("POST", "/v1/chat/completions", {**CHAT, "stream_options": {"include_usage": True, "usage": 1}},
     ["stream_options.usage"]),
    # The RPC binds its body to a field (`body: "card"`): paths are the card's.
    ("POST", "/v1/personas/import", {"spec": "chara_card_v2", "data": {"name": "X", "nme": "X"}}, ["data.nme"]),
    # Several at once, each named.
    ("POST", "/v1/personas", {"intent": INTENT, "visiblity": "public", "soul": {"fears": "x"}},
     ["visiblity", "soul.fears"]),
    # An unknown object is named, not each key inside it.
    ("POST", "/v1/chat/completions", {**CHAT, "streamOptions": {"includeUsage": True}}, ["streamOptions"]),
])
def test_unknown_body_fields_are_refused_by_name(http, tenant, method, path, body, unknown):
    _unknown(http.request(method, path, json=body, headers=tenant.auth), *unknown)


def test_nothing_is_created_when_a_field_is_unknown(http, tenant):
    before = len(http.get("/v1/keys", headers=tenant.auth).json()["items"])
    _unknown(http.post("/v1/keys", json={"name": "k", "scopes": SCOPES, "scope": "x"}, headers=tenant.auth), "scope")
    assert len(http.get("/v1/keys", headers=tenant.auth).json()["items"]) == before


def test_free_form_values_keep_any_keys(http, tenant):
    # A persona's metadata is the caller's own: its keys are not fields.
    metadata = {"visiblity": "x", "team": {"soul": [{"desir": 1}]}, "in.dots,and%": True}
    r = http.post("/v1/personas", json={"intent": INTENT, "metadata": metadata}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert r.json()["metadata"] == metadata
    # A tool's JSON schema (Struct) and content parts (Value) pass the body check (then: no such model).
    tool = {"type": "function", "function": {"name": "f", "parameters": {"properties": {"nmae": {"type": "string"}}}}}
    body = {**CHAT, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "f"}},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "extra": 1}]}]}
    assert_envelope(http.post("/v1/chat/completions", json=body, headers=tenant.auth), 404, "model_not_found")
    # The edge does not walk free-form values: their many distinct keys never overflow the list.
    schema = {"type": "object", "properties": {f"property_number_{i}": {"type": "string"} for i in range(600)}}
    body = {**CHAT, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    assert_envelope(http.post("/v1/chat/completions", json=body, headers=tenant.auth), 404, "model_not_found")


def test_openai_clients_may_send_openai_parameters(http, tenant):
    # Declared in the proto (ignored), so OpenAI clients work unchanged; a reply's
    # message sent back in the conversation keeps its `refusal`.
    body = {**CHAT, "top_p": 0.9, "n": 1, "stop": ["\n"], "seed": 2**40, "presence_penalty": 0.1,
            "frequency_penalty": 0.1, "logit_bias": {"50256": -100}, "response_format": {"type": "text"},
            "parallel_tool_calls": False, "metadata": {"any": "thing"}, "messages": [
                {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "refusal": None}]}
    assert_envelope(http.post("/v1/chat/completions", json=body, headers=tenant.auth), 404, "model_not_found")
    error = assert_envelope(http.post("/v1/chat/completions", json={**CHAT, "n": 2}, headers=tenant.auth),
                            400, "validation_failed")  # OpenAI's status for it
    assert error["details"]["validationErrors"][0]["path"] == "n"


@pytest.mark.parametrize("raw", [
    '{"name": "k", "scopes": ["personas:read"], "expires_at": "2030-01-01T00:00:00Z"}',  # the proto name
    '{"na\\u006de": "k", "scopes": ["personas:read"]}',  # an escaped key is the key it spells
    '  {"name": "k", "scopes": ["personas:read"], "ipAllowlist": []}',
])
def test_known_fields_in_any_spelling_the_transcoder_takes(http, tenant, raw):
    r = http.post("/v1/keys", content=raw, headers={**tenant.auth, "content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_an_escaped_unknown_key_is_named_as_it_decodes(http, tenant):
    raw = '{"name": "k", "scopes": ["personas:read"], "n\\u00e4me": "k", "a.b": 1}'
    r = http.post("/v1/keys", content=raw, headers={**tenant.auth, "content-type": "application/json"})
    _unknown(r, "näme", "a.b")


@pytest.mark.parametrize("forged", ["visiblity", "!", "soul.desir,nmae"])
def test_the_key_list_cannot_be_forged(http, tenant, forged):
    headers = {**tenant.auth, body_keys.HEADER: forged}
    r = http.post("/v1/keys", json={"name": "k", "scopes": SCOPES}, headers=headers)
    assert r.status_code == 200, r.text
    r = http.post("/v1/keys", content=b"", headers={**headers, "content-type": "application/json"})
    assert_envelope(r, 422, "validation_failed")  # no body: the forged list is not what fails it
    assert http.get(f"/v1/orgs/{tenant.org_id}", headers=headers).status_code == 200


def test_native_grpc_callers_cannot_send_a_key_list(edge_channel, tenant):
    stub = keys_pb2_grpc.ApiKeyServiceStub(edge_channel)
    created = stub.CreateApiKey(keys_pb2.CreateApiKeyRequest(name="k", scopes=SCOPES),
                                metadata=(*tenant.metadata, (body_keys.HEADER, "visiblity")))
    assert created.key.id


def test_too_many_distinct_keys_are_refused(http, tenant):
    body = {"intent": INTENT, **{f"unknown_field_{i}": i for i in range(400)}}
    error = assert_envelope(http.post("/v1/personas", json=body, headers=tenant.auth), 400, "bad_request")
    assert error["details"] == {"reason": "too_many_fields"}


def test_many_array_elements_share_one_path(http, tenant):
    body = {**CHAT, "messages": [{"role": "user", "content": "Hi"}] * 500}  # the most allowed
    assert_envelope(http.post("/v1/chat/completions", json=body, headers=tenant.auth), 404, "model_not_found")


def test_every_legitimate_body_fits_the_key_list(stack):
    """No false positives by construction: the longest key list a valid body
    of any RPC can produce (every field, in its longer spelling) fits."""
    services = find_services(stack.modules.service_names)

    def longest(message, prefix: str, seen: frozenset) -> int:
        total = 0
        for field in message.fields:
            path = prefix + max(field.name, field.json_name, key=len) + ("[]" if field.is_repeated else "")
            total += len(path) + 1
            nested = field.message_type
            if nested is not None and not body_keys._opaque(field):
                assert nested.full_name not in seen, f"{nested.full_name} is recursive: its key list is unbounded"
                total += longest(nested, path + ".", seen | {nested.full_name})
        return total

    roots = [body_keys.body_root(m) for s in services for m in s.methods]
    assert len([r for r in roots if r is not None]) > 30
    for root in roots:
        if root is not None:
            assert longest(root, "", frozenset({root.full_name})) < body_keys.MAX_LENGTH // 4, root.full_name


def test_the_edge_and_the_server_agree_on_the_bound():
    lua = (edge.EDGE / "envelope.lua").read_text()
    assert int(re.search(r"BODY_KEYS_MAX = (\d+)", lua).group(1)) == body_keys.MAX_LENGTH
    assert f'"{body_keys.HEADER}"' in lua and json.dumps(body_keys.OVERFLOW) in lua
