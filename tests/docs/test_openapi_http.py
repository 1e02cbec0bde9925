"""The published contract through Envoy: `/v1/openapi.json` is valid OpenAPI
3.1 and covers every route the edge serves; `/docs` is a self-contained page."""

from __future__ import annotations

import re

from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from openapi_spec_validator import validate
from persona_service.registry import MODULES

_VARIABLE = re.compile(r"\{([^}=]+)(?:=[^}]*)?\}")


def _routes() -> set[tuple[str, str]]:
    pool = descriptor_pool.Default()
    found = set()
    for name in MODULES.service_names:
        for method in pool.FindServiceByName(name).methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            for binding in [rule, *rule.additional_bindings]:
                kind = binding.WhichOneof("pattern")
                if kind and kind != "custom":
                    found.add((kind, _VARIABLE.sub(lambda m: "{" + m.group(1) + "}", getattr(binding, kind))))
    return found


def test_the_document_is_valid_openapi_covering_every_route(http):
    r = http.get("/v1/openapi.json")  # no credential
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    document = r.json()
    validate(document)
    assert document["openapi"] == "3.1.0"
    documented = {(verb, path) for path, item in document["paths"].items() for verb in item}
    assert documented == _routes()


def test_operations_state_their_contract(http):
    document = http.get("/v1/openapi.json").json()
    create = document["paths"]["/v1/personas"]["post"]
    body = document["components"]["schemas"][create["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                                             .rsplit("/", 1)[-1]]
    assert "intent" in body["required"] and body["properties"]["intent"]["maxLength"] > 0
    assert create["security"] == [{"bearer": []}] and "429" in create["responses"] and "422" in create["responses"]
    assert document["paths"]["/healthz"]["get"]["security"] == []
    scim = document["paths"]["/v1/auth/scim/v2/Users"]["post"]
    assert "201" in scim["responses"] and "application/scim+json" in scim["requestBody"]["content"]
    assert scim["responses"]["422"]["$ref"].endswith("/Scim422")
    stream = document["paths"]["/v1/chat/sessions/{id}/messages:stream"]["post"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    pdf = document["paths"]["/v1/billing/invoices/{id}/pdf"]["get"]
    assert "307" in pdf["responses"]
    edit = document["paths"]["/v1/personas/{persona_id}/portrait/{id}/edit"]["post"]
    assert edit["responses"]["422"]["$ref"].endswith("/Portrait422")


def test_the_edges_own_answers_are_shared_components_where_they_apply(http):
    document = http.get("/v1/openapi.json").json()
    operations = {op["operationId"]: op for item in document["paths"].values() for op in item.values()}
    responses = document["components"]["responses"]
    assert responses["Envelope405"]["headers"]["Allow"]["schema"] == {"type": "string"}
    assert responses["Scim405"]["headers"]["Allow"]
    for status in ("400", "405", "408", "413", "415", "426", "431"):
        assert "The edge's answer" in responses[f"Envelope{status}"]["description"], status
    for name in ("CreatePersona", "ListPersonas"):
        refs = {s: r["$ref"].rsplit("/", 1)[-1] for s, r in operations[name]["responses"].items() if "$ref" in r}
        takes_body = "requestBody" in operations[name]
        for status in ("400", "405", "408", "426", "431", *(("413", "415") if takes_body else ())):
            assert refs[status] == f"Envelope{status}", (name, status)
        assert takes_body or not {"413", "415"} & set(refs), name
    # The portrait shape only for the statuses the spec gives it; the envelope for the others.
    edit = {s: r["$ref"].rsplit("/", 1)[-1] for s, r in operations["EditPortrait"]["responses"].items() if "$ref" in r}
    assert {s for s, name in edit.items() if name.startswith("Portrait")} == {"404", "422", "502"}
    assert edit["429"] == "Envelope429" and edit["504"] == "Envelope504" and edit["415"] == "Envelope415"


def test_the_reference_page_is_self_contained(http):
    r = http.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "/v1/personas" in page and "<script" not in page
    assert not re.search(r"""(src|href)=["']?https?://""", page)  # nothing fetched from elsewhere
