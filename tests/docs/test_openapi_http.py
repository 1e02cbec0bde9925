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
    pdf = document["paths"]["/v1/billing/invoices/{invoice_id}/pdf"]["get"]
    assert "307" in pdf["responses"]
    edit = document["paths"]["/v1/personas/{persona_id}/portrait/{portrait_id}/edit"]["post"]
    assert edit["responses"]["422"]["$ref"].endswith("/Portrait422")


def test_the_reference_page_is_self_contained(http):
    r = http.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "/v1/personas" in page and "<script" not in page
    assert not re.search(r"""(src|href)=["']?https?://""", page)  # nothing fetched from elsewhere
