"""The headers clients code against are in the OpenAPI document, declared
once (components/headers, components/parameters), and say what the API does:
`Idempotency-Key` on exactly the operations whose policy honours it,
`X-Request-Id` on every answer, the rate-limit headers on every answer the
server makes (the edge's own carry none), `Retry-After` on 429, `X-Run-Id`
on streams, `Location` on redirects. Behaviour is read through Envoy on a
sample of operations, so the document cannot drift from what is sent."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from persona.v1 import options_pb2
from persona_service.registry import MODULES
from support import sse_events

_VARIABLE = re.compile(r"\{([^}=]+)(?:=[^}]*)?\}")
IDEMPOTENCY_KEY = {"$ref": "#/components/parameters/IdempotencyKey"}
# The headers the document declares, as the API sends them (lowercase).
DECLARED = re.compile(r"x-request-id|x-ratelimit-\w+|ratelimit(-policy)?|x-service-plan-window-seconds|retry-after"
                      r"|x-run-id|location|idempotent-replayed")
RATE_LIMIT = {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-service-plan-window-seconds",
              "ratelimit-policy", "ratelimit"}


@pytest.fixture(scope="module")
def document(http) -> dict[str, Any]:
    return http.get("/v1/openapi.json").json()


def resolve(document: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in item:
        section, name = item["$ref"].split("/")[-2:]
        item = document["components"][section][name]
    return item


def declared(document: dict[str, Any], path: str, verb: str, status: int) -> dict[str, bool]:
    """The headers the document declares for one answer: lowercase name -> required."""
    response = resolve(document, document["paths"][path][verb]["responses"][str(status)])
    return {name.lower(): resolve(document, header).get("required", False)
            for name, header in response.get("headers", {}).items()}


def check(document: dict[str, Any], path: str, verb: str, response) -> set[str]:
    """The answer's headers of the declared kinds: each one declared for its status, every required one sent."""
    headers = declared(document, path, verb, response.status_code)
    sent = {name for name in response.headers.keys() if DECLARED.fullmatch(name)}
    assert sent <= set(headers), (verb, path, response.status_code, sorted(sent - set(headers)))
    missing = {name for name, required in headers.items() if required} - sent
    assert not missing, (verb, path, response.status_code, sorted(missing))
    return sent


def _policies():
    """(verb, path, honours an Idempotency-Key) of every HTTP binding, from the RPCs' policies as the server reads them."""
    pool = descriptor_pool.Default()
    for name in MODULES.service_names:
        for method in pool.FindServiceByName(name).methods:
            policy = method.GetOptions().Extensions[options_pb2.policy]
            # Read for a caller's writes, streams too (a replay follows the first request's run).
            honours = policy.write and not policy.anonymous
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            for binding in [rule, *rule.additional_bindings]:
                kind = binding.WhichOneof("pattern")
                if kind and kind != "custom":
                    yield kind, _VARIABLE.sub(lambda m: "{" + m.group(1) + "}", getattr(binding, kind)), honours


def test_exactly_the_operations_that_honour_an_idempotency_key_declare_it(document):
    parameter = document["components"]["parameters"]["IdempotencyKey"]
    assert parameter["name"] == "Idempotency-Key" and parameter["in"] == "header" and not parameter["required"]
    honouring = 0
    for verb, path, honours in _policies():
        operation = document["paths"][path][verb]
        assert (IDEMPOTENCY_KEY in operation.get("parameters", [])) is honours, (verb, path)
        replayed = {status for status, answer in operation["responses"].items()
                    if "Idempotent-Replayed" in answer.get("headers", {})}
        assert replayed == ({s for s in operation["responses"] if s[0] in "23"} if honours else set()), (verb, path)
        honouring += honours
    assert honouring > 20


def test_every_operation_declares_the_headers_of_its_answers(document):
    for path, item in document["paths"].items():
        for verb, operation in item.items():
            for status, answer in operation["responses"].items():
                headers = declared(document, path, verb, int(status))
                assert headers.get("x-request-id") is True, (verb, path, status)
                if status[0] in "23" or status == "429":
                    assert RATE_LIMIT <= set(headers), (verb, path, status)
                if status in ("429", "503"):
                    assert "retry-after" in headers, (verb, path, status)
                if status == "307":
                    assert headers.get("location") is True, (verb, path)
                if "text/event-stream" in resolve(document, answer).get("content", {}):
                    assert headers.get("x-run-id") is True, (verb, path)
    described = document["components"]["headers"]
    assert all(header["description"] for header in described.values())


def test_answers_carry_what_the_document_declares(http, document, tenants):
    org = tenants(plan="free")
    sent = check(document, "/v1/billing/subscription", "get", http.get("/v1/billing/subscription", headers=org.auth))
    assert RATE_LIMIT | {"x-request-id"} <= sent
    assert RATE_LIMIT <= check(document, "/healthz", "get", http.get("/healthz"))  # no credential: the address's

    key = {**org.auth, "Idempotency-Key": str(uuid.uuid4())}
    first = http.post("/v1/personas", json={"intent": "A lighthouse keeper who collects sea glass"}, headers=key)
    again = http.post("/v1/personas", json={"intent": "A lighthouse keeper who collects sea glass"}, headers=key)
    assert first.status_code == again.status_code == 200, first.text
    assert "idempotent-replayed" not in check(document, "/v1/personas", "post", first)
    assert {"idempotent-replayed"} | RATE_LIMIT <= check(document, "/v1/personas", "post", again)

    with http.stream("POST", "/v1/personas:stream", json={"intent": "A beekeeper who writes sonnets"},
                     headers=org.auth) as stream:
        assert stream.status_code == 200
        assert {"x-run-id"} | RATE_LIMIT <= check(document, "/v1/personas:stream", "post", stream)
        assert list(sse_events(stream.iter_lines()))

    assert http.post("/v1/billing/subscription/change", json={"plan": "pro"}, headers=org.auth).status_code == 200
    invoice = http.get("/v1/billing/invoices", headers=org.auth).json()["items"][0]["invoiceId"]
    pdf = http.get(f"/v1/billing/invoices/{invoice}/pdf", headers=org.auth, follow_redirects=False)
    assert pdf.status_code == 307
    assert {"location"} | RATE_LIMIT <= check(document, "/v1/billing/invoices/{id}/pdf", "get", pdf)

    # The server's errors carry the rate-limit headers too.
    for path, verb, response in [
        ("/v1/personas/{id}", "get", http.get(f"/v1/personas/{uuid.uuid4()}", headers=org.auth)),
        ("/v1/personas", "get", http.get("/v1/personas")),
        ("/v1/personas", "post", http.post("/v1/personas", json={}, headers=org.auth)),
    ]:
        assert response.status_code in (401, 404, 422), response.text
        assert RATE_LIMIT <= check(document, path, verb, response), (verb, path)
    # The edge's own answers carry a request id and no rate-limit header.
    response = http.post("/v1/personas", content=b"intent", headers={**org.auth, "Content-Type": "text/plain"})
    assert response.status_code == 415
    assert check(document, "/v1/personas", "post", response) == {"x-request-id"}
    for response in (http.get("/v1/no-such-thing", headers=org.auth),
                     http.delete("/v1/billing/subscription", headers=org.auth)):
        assert response.status_code in (404, 405), response.text
        assert {n for n in response.headers.keys() if DECLARED.fullmatch(n)} == {"x-request-id"}


def test_a_429_carries_retry_after_and_the_rate_limits(http, document, tenants):
    org = tenants(plan="free")  # 60 a minute, never leased: the 61st call is refused
    # Fixed minute windows: 200 calls span at most one boundary, so one window sees more than 60.
    for _ in range(200):
        response = http.get("/v1/billing/subscription", headers=org.auth)
        if response.status_code == 429:
            break
    assert response.status_code == 429, response.text
    assert RATE_LIMIT | {"retry-after"} <= check(document, "/v1/billing/subscription", "get", response)
    assert int(response.headers["retry-after"]) > 0 and response.headers["x-ratelimit-remaining"] == "0"
