"""The examples in the OpenAPI document (scripts/openapi_examples.json, put there by
scripts/gen_openapi.py and shown in /docs) are true: each validates against its
operation's schemas, and each request, sent through Envoy in order with the ids it
creates in place of the example's, is answered with success and with every field the
example shows (an example may leave out fields added since; never show one that is gone)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from support import ROOT

EXAMPLES = {k: v for k, v in json.loads((ROOT / "scripts" / "openapi_examples.json").read_text()).items()
            if not k.startswith("//")}
# The main operations a newcomer calls first: each must have its example.
MAIN = {"CreatePersona", "GetPersona", "ListPersonas", "CreateChatSession", "SendChatMessage", "CreateChatCompletion",
        "CreateWebhookEndpoint", "CreateApiKey", "ListEvents"}


@pytest.fixture(scope="module")
def document(http) -> dict[str, Any]:
    r = http.get("/v1/openapi.json")
    assert r.status_code == 200
    return r.json()


def operations(document) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {operation["operationId"]: (verb, path, operation)
            for path, item in document["paths"].items() for verb, operation in item.items()}


def validator(document, schema: dict[str, Any]) -> Draft202012Validator:
    registry = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(document))
    return Draft202012Validator({**schema, "$ref": schema["$ref"].replace("#", "urn:openapi#", 1)}
                                if "$ref" in schema else schema, registry=registry)


def test_the_main_operations_have_examples_that_fit_their_schemas(document):
    assert MAIN <= set(EXAMPLES)
    found = operations(document)
    for operation_id, example in EXAMPLES.items():
        _, _, operation = found[operation_id]
        (answer,) = (a for status, a in operation["responses"].items() if status < "400")
        media = answer["content"]["application/json"]
        assert media["example"] == example["response"], f"{operation_id}: gen/openapi.json is stale (make gen)"
        errors = [e.message for e in validator(document, media["schema"]).iter_errors(example["response"])]
        assert not errors, (operation_id, "answer", errors)
        if "request" in example:
            body = operation["requestBody"]["content"]["application/json"]
            assert body["example"] == example["request"]
            errors = [e.message for e in validator(document, body["schema"]).iter_errors(example["request"])]
            assert not errors, (operation_id, "request", errors)
        named = {p["name"]: p.get("example") for p in operation.get("parameters", []) if "name" in p}
        for name, value in {**example.get("parameters", {}), **example.get("query", {})}.items():
            assert named[name] == value, (operation_id, name)


def shown_fields_are_answered(shown: Any, real: Any, where: str) -> None:
    if isinstance(shown, dict):
        assert isinstance(real, dict), where
        missing = set(shown) - set(real)
        assert not missing, f"{where}: the example shows {sorted(missing)}, which the answer lacks"
        for key, value in shown.items():
            shown_fields_are_answered(value, real[key], f"{where}.{key}")
    elif isinstance(shown, list) and shown and real:
        shown_fields_are_answered(shown[0], real[0], f"{where}[0]")


def test_each_example_request_is_answered_as_its_example_shows(document, http, tenants):
    tenant = tenants(plan="pro")
    found = operations(document)
    real_ids: dict[str, str] = {}  # the example's ids -> the ones this run created

    def ours(value: Any) -> Any:
        text = json.dumps(value)
        for example_id, real_id in real_ids.items():
            text = text.replace(example_id, real_id)
        return json.loads(text)

    for operation_id, example in EXAMPLES.items():  # in order: later examples use what earlier ones created
        verb, path, _ = found[operation_id]
        for name, value in ours(example.get("parameters", {})).items():
            path = path.replace("{" + name + "}", value)
        r = http.request(verb.upper(), path, headers=tenant.auth, params=example.get("query"),
                         json=ours(example["request"]) if "request" in example else None)
        assert r.status_code == 200, (operation_id, r.text)
        shown_fields_are_answered(example["response"], r.json(), operation_id)
        for key in ("id", "sessionId"):
            if isinstance(example["response"].get(key), str):
                real_ids[example["response"][key]] = r.json()[key]


def test_the_reference_page_shows_the_examples(http):
    page = http.get("/docs").text
    shown = re.findall(r"<summary>example (request|answer \(200\))</summary>", page)
    assert shown.count("answer (200)") == len(EXAMPLES)
    assert shown.count("request") == sum("request" in e for e in EXAMPLES.values())
    assert "A patient gardener who names every snail" in page
