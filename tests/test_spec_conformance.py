"""The spec (`../shared/spec/persona-service-api.md`, read by spec_doc.py) against
what we publish and answer: every operation it names, every field of its
resource tables (JSON type and requiredness), every request parameter it
documents and every catalogue code with its status, in `gen/openapi.json`; and
one happy and one error call per operation through Envoy, validated against
the same tables and the error catalogue.

Each difference is a finding with a stable id (`optional Invoice.paidAt`). The
ones the project keeps on purpose are listed in spec_divergences.toml, each
with its reason; any other finding fails, and so does an entry no finding
matches any more (the list stays exactly what is true)."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import time
import tomllib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import spec_doc
from spec_doc import JSON_TYPES, Endpoint, Field, Spec, template

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPENAPI = ROOT / "gen" / "openapi.json"
DIVERGENCES = pathlib.Path(__file__).with_name("spec_divergences.toml")

# Resource tables no endpoint row answers with: the operation whose success answer is that resource.
RESOURCE_ANSWERS = {"API key": "GET /v1/keys/{}", "Event envelope": "GET /v1/events/{}"}


@dataclass(frozen=True)
class Finding:
    id: str  # `<kind> <subject>`: what spec_divergences.toml names
    detail: str


@dataclass(frozen=True)
class Divergence:
    id: str
    reason: str
    json: str | None = None  # for `named`: the JSON field a descriptive row is
    type: str | None = None  # ... and its JSON type


def load_divergences(path: pathlib.Path = DIVERGENCES) -> dict[str, Divergence]:
    entries = tomllib.loads(path.read_text())["divergence"]
    found = {}
    for entry in entries:
        divergence = Divergence(**entry)
        assert divergence.id not in found, f"{divergence.id!r} is listed twice"
        assert divergence.reason.strip(), f"{divergence.id!r} has no reason"
        found[divergence.id] = divergence
    return found


@pytest.fixture(scope="module")
def spec() -> Spec:
    return spec_doc.load()


@pytest.fixture(scope="module")
def openapi() -> dict:
    return json.loads(OPENAPI.read_text())


@pytest.fixture(scope="module")
def divergences() -> dict[str, Divergence]:
    return load_divergences()


def unexpected(findings: Iterable[Finding], divergences: dict[str, Divergence]) -> list[str]:
    return sorted({f"{f.id}: {f.detail}" for f in findings if f.id not in divergences})


def explain(lines: list[str]) -> str:
    return ("differences from the spec (fix them, or list a deliberate one in tests/spec_divergences.toml "
            "with its reason):\n  " + "\n  ".join(lines))


# --- JSON types -------------------------------------------------------------------------


def field_name_and_type(resource: str, field: Field, divergences: dict[str, Divergence]) -> tuple[str, str] | Finding:
    """The JSON name and type of a row; a descriptive row (`IP allowlist | IP ranges`) needs a `named` entry."""
    if field.type in JSON_TYPES:
        return field.name, field.type
    named = divergences.get(f"named {resource}.{field.name}")
    if named is None or not named.json or not named.type or named.type not in JSON_TYPES:
        return Finding(f"named {resource}.{field.name}",
                       f"type {field.type!r} is no JSON type: name its JSON field and type in the divergences file")
    return named.json, named.type


def value_findings(resource: str, fields: Iterable[Field], body: Any, divergences: dict[str, Divergence],
                   id_prefix: str | None = None) -> list[Finding]:
    """A live JSON object against a field table: presence, JSON type, allowed values, id forms."""
    if not isinstance(body, dict):
        return [Finding(f"type {resource}", f"not a JSON object: {body!r}"[:300])]
    findings = []
    for n, field in enumerate(fields):
        named = field_name_and_type(resource, field, divergences)
        if isinstance(named, Finding):
            findings.append(named)
            continue
        name, kind = named
        subject = f"{resource}.{field.name}"
        if name not in body:
            if field.required:
                findings.append(Finding(f"absent {subject}", f"`{name}` missing from {sorted(body)}"))
            continue
        value = body[name]
        if value is None:
            findings.append(Finding(f"nullable {subject}", f"`{name}` is null, the spec says {kind}"))
            continue
        values = value if kind.endswith("[]") and isinstance(value, list) else [value]
        if not all(is_json_type(v, kind.removesuffix("[]")) for v in values) or (
                kind.endswith("[]") and not isinstance(value, list)):
            findings.append(Finding(f"type {subject}", f"`{name}` = {value!r} is not {kind}"[:300]))
            continue
        if field.choices and not set(values) <= set(field.choices):
            findings.append(Finding(f"choices {subject}", f"`{name}` = {value!r} is none of {field.choices}"))
        if "ISO 8601 UTC" in field.notes and not is_utc_timestamp(value):
            findings.append(Finding(f"format {subject}", f"`{name}` = {value!r} is no ISO 8601 UTC timestamp"))
        prefix = field.id_prefix or (id_prefix if n == 0 else None)
        if prefix and not str(value).startswith(prefix):
            findings.append(Finding(f"form {subject}", f"`{name}` = {value!r} is not `{prefix}*`"))
    return findings


def is_utc_timestamp(value: str) -> bool:
    try:
        return datetime.fromisoformat(value).utcoffset() == timedelta(0)
    except (TypeError, ValueError):
        return False


def is_json_type(value: Any, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"string": str, "boolean": bool, "object": dict}[kind])


# --- gen/openapi.json -------------------------------------------------------------------


class OpenApi:
    def __init__(self, doc: dict):
        self.doc = doc
        self.operations = {f"{method.upper()} {template(path)}": op
                           for path, item in doc["paths"].items() for method, op in item.items()}

    def resolve(self, node: dict) -> dict:
        while "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def types(self, schema: dict) -> set[str]:
        """The spec's JSON type names a schema allows (`string`, `number`, `object[]`, `null`)."""
        schema = self.resolve(schema)
        if "oneOf" in schema or "anyOf" in schema:
            return set().union(*(self.types(s) for s in schema.get("oneOf", schema.get("anyOf", []))))
        kinds = schema.get("type", "object" if "properties" in schema else None)
        found = set()
        for kind in kinds if isinstance(kinds, list) else [kinds]:
            if kind == "array":
                found |= {f"{t}[]" for t in self.types(schema.get("items", {})) if t != "null"}
            elif kind == "integer":
                found.add("number")
            elif kind is not None:
                found.add(kind)
        return found

    def json_schema(self, response: dict) -> dict | None:
        content = self.resolve(response).get("content", {})
        media = next((m for m in content if m == "application/json" or m.endswith("+json")), None)
        return content[media]["schema"] if media else None

    def answer(self, key: str) -> dict | None:
        """The schema of an operation's success answer."""
        op = self.operations.get(key)
        if op is None:
            return None
        status = min((s for s in op["responses"] if s.startswith("2")), default=None)
        schema = self.json_schema(op["responses"][status]) if status else None
        return self.resolve(schema) if schema else None

    def refs(self, schema: dict) -> set[str]:
        """The component names a schema is, directly or as one of its alternatives."""
        if "$ref" in schema:
            return {schema["$ref"].rsplit("/", 1)[-1]} | self.refs(self.resolve(schema))
        return set().union(*(self.refs(s) for s in schema.get("oneOf", schema.get("anyOf", []))))


def schema_findings(api: OpenApi, resource: str, fields: Iterable[Field], schema: dict | None,
                    divergences: dict[str, Divergence]) -> list[Finding]:
    if schema is None:
        return [Finding(f"schema {resource}", "no JSON schema answers it in gen/openapi.json")]
    properties, required = schema.get("properties", {}), set(schema.get("required", []))
    findings = []
    for field in fields:
        named = field_name_and_type(resource, field, divergences)
        if isinstance(named, Finding):
            findings.append(named)
            continue
        name, kind = named
        subject = f"{resource}.{field.name}"
        if name not in properties:
            findings.append(Finding(f"absent {subject}", f"`{name}` is not among {sorted(properties)}"))
            continue
        types = api.types(properties[name])
        if kind not in types:
            findings.append(Finding(f"type {subject}", f"`{name}` is {sorted(types)}, the spec says {kind}"))
        elif "null" in types:
            findings.append(Finding(f"nullable {subject}", f"`{name}` is {sorted(types)}, the spec says {kind}"))
        if field.required and name not in required:
            findings.append(Finding(f"optional {subject}", f"`{name}` is not in the schema's `required`"))
        enum = api.resolve(properties[name]).get("enum") or api.resolve(properties[name]).get("items", {}).get("enum")
        if field.choices and enum is not None and not set(field.choices) <= set(enum):
            findings.append(Finding(f"choices {subject}", f"`{name}` allows {enum}, the spec {field.choices}"))
    return findings


def param_findings(api: OpenApi, endpoint: Endpoint, op: dict) -> list[Finding]:
    findings = []
    declared = {(p["in"], p["name"]): p for p in (api.resolve(p) for p in op.get("parameters", []))}
    body = op.get("requestBody")
    body_schema = api.resolve(api.json_schema(body) or {}) if body else {}
    path_params = [p for (where, _), p in declared.items() if where == "path"]
    for param in endpoint.params:
        subject = f"{endpoint.key} {param.name}"
        if param.location == "path":
            # Path parameters are matched by position: their names are documentation, not wire.
            index = [p.name for p in endpoint.params if p.location == "path"].index(param.name)
            schema = path_params[index]["schema"] if index < len(path_params) else None
            required = True
        elif param.location == "query":
            found = declared.get(("query", param.name))
            schema, required = (found["schema"], found.get("required", False)) if found else (None, False)
        else:
            schema = body_schema.get("properties", {}).get(param.name)
            required = param.name in body_schema.get("required", [])
        if schema is None:
            findings.append(Finding(f"param {subject}", f"{param.location} parameter `{param.name}` is not declared"))
            continue
        schema = api.resolve(schema)
        if param.type not in api.types(schema):
            findings.append(Finding(f"param {subject}", f"`{param.name}` is {sorted(api.types(schema))}, "
                                                        f"the spec says {param.type}"))
        if param.required and not required:
            findings.append(Finding(f"param {subject}", f"`{param.name}` is required by the spec, optional here"))
        for key, want in (("minimum", param.minimum), ("maximum", param.maximum), ("maxLength", param.max_length)):
            if want is not None and schema.get(key) != want:
                findings.append(Finding(f"param {subject}", f"`{param.name}` {key} {schema.get(key)}, the spec {want}"))
    return findings


def response_findings(api: OpenApi, spec: Spec, endpoint: Endpoint, op: dict,
                      divergences: dict[str, Divergence]) -> list[Finding]:
    findings = []
    for status in endpoint.statuses:
        response = op["responses"].get(str(status))
        if response is None:
            findings.append(Finding(f"status {endpoint.key} {status}", f"{status} is not among {sorted(op['responses'])}"))
            continue
        if status < 400:
            continue
        shape = "PortraitError" if endpoint.portrait_errors else "ErrorEnvelope"
        schema = api.json_schema(response)
        if schema is None or shape not in api.refs(schema):
            findings.append(Finding(f"error-shape {endpoint.key} {status}", f"{status} is not a {shape}"))
    if endpoint.success and endpoint.resource and endpoint.success[0] < 300:
        findings += schema_findings(api, endpoint.resource, spec.resources[endpoint.resource].fields,
                                    api.answer(endpoint.key), divergences)
    return findings


def catalogue_findings(api: OpenApi, spec: Spec) -> list[Finding]:
    """Each code of the catalogue, with its status, on the error answers of the operations."""
    statuses: dict[str, set[int]] = {}
    envelope = api.resolve({"$ref": "#/components/schemas/ErrorEnvelope"}) \
        if "ErrorEnvelope" in api.doc["components"]["schemas"] else {}
    for op in api.operations.values():
        for status, response in op["responses"].items():
            if status.isdigit() and int(status) >= 400:
                for code in spec_doc.TICKED.findall(api.resolve(response).get("description", "")):
                    statuses.setdefault(code, set()).add(int(status))
    findings = []
    error = api.resolve(envelope.get("properties", {}).get("error", {}))
    codes = api.resolve(error.get("properties", {}).get("code", {})).get("enum", [])
    for code, status in spec.codes.items():
        if statuses.get(code) != {status} or code not in codes:
            findings.append(Finding(f"catalogue {code}", f"documented with {sorted(statuses.get(code, []))}, the spec "
                                                         f"says {status}; in the envelope's codes: {code in codes}"))
    missing = [k for k in spec.envelope if k not in error.get("properties", {})]
    if missing or set(spec.envelope) - {"details"} - set(error.get("required", [])):
        findings.append(Finding("envelope ErrorEnvelope", f"the error object's keys {sorted(error.get('properties', {}))}"
                                                          f" / required {error.get('required')}, the spec {spec.envelope}"))
    return findings


def openapi_findings(spec: Spec, doc: dict, divergences: dict[str, Divergence]) -> list[Finding]:
    api = OpenApi(doc)
    findings = []
    for key, endpoint in spec.endpoints.items():
        op = api.operations.get(key)
        if op is None:
            findings.append(Finding(f"operation {key}", "not in gen/openapi.json"))
            continue
        if not any("bearer" in requirement for requirement in op.get("security", api.doc.get("security", []))):
            findings.append(Finding(f"auth {key}", "the spec requires `Authorization: Bearer` on every endpoint"))
        findings += param_findings(api, endpoint, op) + response_findings(api, spec, endpoint, op, divergences)
    answered = {e.resource for e in spec.endpoints.values() if e.resource}
    for name, resource in spec.resources.items():
        if name in answered or name == "Portrait error":
            continue
        if name not in RESOURCE_ANSWERS:
            findings.append(Finding(f"schema {name}", "no endpoint answers this table: map it in RESOURCE_ANSWERS"))
            continue
        findings += schema_findings(api, name, resource.fields, api.answer(RESOURCE_ANSWERS[name]), divergences)
    portrait = api.doc["components"]["schemas"].get("PortraitError")
    findings += schema_findings(api, "Portrait error", spec.resources["Portrait error"].fields, portrait, divergences)
    return findings + catalogue_findings(api, spec)


def test_the_spec_is_read_whole(spec):
    """The parser found what the spec holds (a parser that reads nothing would pass everything)."""
    table_rows = [e for e in spec.endpoints.values() if e.request]
    assert len(table_rows) >= 14 and all(e.statuses or "not shown" in e.response for e in table_rows)
    assert len(spec.endpoints) > len(table_rows)  # the operations named elsewhere
    assert {"Organization", "Chat session", "Invoice", "Portrait edit result", "Event envelope"} <= set(spec.resources)
    assert all(r.fields for r in spec.resources.values())
    assert len(spec.resources["Event envelope"].fields[1].choices) == 16  # "Exactly sixteen event types"
    assert len(spec.codes) == 14 and spec.envelope == ("code", "message", "details")
    assert "X-RateLimit-Limit" in spec.every_answer_headers


def test_openapi_matches_the_spec(spec, openapi, divergences):
    problems = unexpected(openapi_findings(spec, openapi, divergences), divergences)
    assert not problems, explain(problems)


def test_a_planted_divergence_fails(spec, openapi, divergences):
    """Each kind of static check catches a change planted in a copy of the document."""
    planted = copy.deepcopy(openapi)
    api, paths = OpenApi(planted), planted["paths"]
    del api.answer("GET /v1/chat/sessions/{}")["properties"]["sessionId"]  # type: ignore[index]
    api.answer("GET /v1/orgs/{}")["properties"]["workspacesCount"] = {"type": "string"}  # type: ignore[index]
    paths.pop(next(p for p in paths if template(p) == "/v1/personas/{}/voice"))
    for item in paths.values():
        for op in item.values():
            if "409" in op["responses"]:
                op["responses"]["410"] = op["responses"]["409"]  # `state_conflict`, ... now also 410
    (webhooks,) = [item["get"] for p, item in paths.items() if template(p) == "/v1/webhooks"]
    webhooks["parameters"] = [p for p in webhooks["parameters"] if p["name"] != "limit"]
    found = {f.id for f in openapi_findings(spec, planted, divergences)} - \
        {f.id for f in openapi_findings(spec, openapi, divergences)}
    assert {"absent Chat session.sessionId", "type Organization.workspacesCount", "operation GET /v1/personas/{}/voice",
            "catalogue state_conflict", "param GET /v1/webhooks limit"} <= found, found
    assert unexpected((Finding(i, "") for i in found), divergences)


# --- live, through Envoy ----------------------------------------------------------------


@dataclass
class World:
    org: Any  # an Enterprise tenant (no quota gets in the way)
    admin: Any  # a platform administrator
    persona: dict
    session: dict
    invoice_owner: Any
    invoice: dict
    portrait: dict
    endpoint: dict
    scim_token: str


def ok(response: httpx.Response, *statuses: int) -> dict:
    assert response.status_code in (statuses or (200,)), response.text
    return response.json()


def route(operation_id: str, *values: str) -> str:
    """The path of a setup call, found by its operationId (not the spec's: those calls are under
    test and use the spec's own paths), with its parameters filled in order."""
    doc = json.loads(OPENAPI.read_text())
    (path,) = [p for p, item in doc["paths"].items() if any(o["operationId"] == operation_id for o in item.values())]
    for value in values:
        path = re.sub(r"\{[^}]*\}", value, path, count=1)
    return path


@pytest.fixture(scope="module")
def world(http, tenants) -> World:
    org, admin, invoice_owner = tenants(plan="enterprise"), tenants(plan="enterprise", platform_admin=True), \
        tenants(plan="free")
    persona = ok(http.post(route("CreatePersona"), json={"intent": "A cheerful lighthouse keeper who reads the weather"},
                           headers=org.auth))
    session = ok(http.post(route("CreateChatSession"), json={"personaId": persona["id"]}, headers=org.auth))
    ok(http.post(route("ChangeSubscription"), json={"plan": "pro"}, headers=invoice_owner.auth))
    invoice = ok(http.get(route("ListInvoices"), headers=invoice_owner.auth))["items"][0]
    portrait = ok(http.post(route("CreatePortrait", persona["id"]), json={}, headers=org.auth))
    endpoint = ok(http.post(route("CreateWebhookEndpoint"), json={"url": "http://127.0.0.1:9/hook", "events": ["*"]},
                            headers=org.auth))["endpoint"]
    token = ok(http.post(route("CreateScimToken"), json={"name": "Conformance"}, headers=org.auth))["secret"]
    return World(org, admin, persona, session, invoice_owner, invoice, portrait, endpoint, token)


@dataclass
class Calls:
    happy: httpx.Response
    error: httpx.Response
    code: str  # the catalogue code the error call must answer


NOBODY = {"Authorization": "Bearer sk_live_not_a_key"}
UNKNOWN = str(uuid.uuid4())
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"


def _scim_group(http, w: World, name: str) -> httpx.Response:
    return http.post("/v1/auth/scim/v2/Groups", content=json.dumps({"schemas": [GROUP], "displayName": name}),
                     headers={"Authorization": f"Bearer {w.scim_token}", "Content-Type": "application/scim+json"})


def _delivery(http, w: World) -> str:
    """A delivery of the endpoint (the worker fans the ping out at once; wait for it)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        items = ok(http.get(route("ListWebhookDeliveries", w.endpoint["id"]), headers=w.org.auth))["items"]
        if items:
            return items[0]["id"]
        time.sleep(0.1)
    raise AssertionError("the ping was never fanned out to a delivery")


# One happy and one error call per operation the spec names (keys as spec_doc writes them).
CASES: dict[str, Callable[[httpx.Client, World], Calls]] = {
    "POST /v1/keys": lambda http, w: Calls(
        http.post("/v1/keys", json={"name": "conformance", "scopes": ["chat:read"]}, headers=w.org.auth),
        http.post("/v1/keys", json={"name": "conformance", "scopes": ["read:personas"]}, headers=w.org.auth),
        "validation_failed"),
    "POST /v1/admin/webhooks/rotate-secrets": lambda http, w: Calls(
        http.post("/v1/admin/webhooks/rotate-secrets", json={}, headers=w.admin.auth),
        http.post("/v1/admin/webhooks/rotate-secrets", json={}, headers=w.org.auth), "forbidden"),
    "POST /v1/personas/{}/portrait/{}/edit": lambda http, w: Calls(
        http.post(f"/v1/personas/{w.persona['id']}/portrait/{w.portrait['id']}/edit",
                  json={"instruction": "Make the background blue"}, headers=w.org.auth),
        http.post(f"/v1/personas/{w.persona['id']}/portrait/{UNKNOWN}/edit",
                  json={"instruction": "Make the background blue"}, headers=w.org.auth), "not_found"),
    "GET /v1/chat/sessions/{}": lambda http, w: Calls(
        http.get(f"/v1/chat/sessions/{w.session['sessionId']}", headers=w.org.auth),
        http.get("/v1/chat/sessions/chs_nope", headers=w.org.auth), "not_found"),
    "GET /v1/billing/invoices/{}": lambda http, w: Calls(
        http.get(f"/v1/billing/invoices/{w.invoice['invoiceId']}", headers=w.invoice_owner.auth),
        http.get(f"/v1/billing/invoices/{w.invoice['invoiceId']}", headers=NOBODY), "unauthorized"),
    "GET /v1/billing/invoices/{}/pdf": lambda http, w: Calls(
        http.get(f"/v1/billing/invoices/{w.invoice['invoiceId']}/pdf", headers=w.invoice_owner.auth),
        http.get("/v1/billing/invoices/inv_nope/pdf", headers=w.invoice_owner.auth), "not_found"),
    "GET /v1/orgs/{}": lambda http, w: Calls(
        http.get(f"/v1/orgs/{w.org.org_id}", headers=w.org.auth),
        http.get("/v1/orgs/org_nope", headers=w.org.auth), "not_found"),
    "POST /v1/auth/scim/v2/Groups": lambda http, w: Calls(
        _scim_group(http, w, f"conformance-{uuid.uuid4().hex[:8]}"), _scim_group(http, w, "persona:*:owner"),
        "validation_failed"),
    "GET /v1/personas/{}/voice": lambda http, w: Calls(
        http.get(f"/v1/personas/{w.persona['id']}/voice", headers=w.org.auth),
        http.get(f"/v1/personas/{UNKNOWN}/voice", headers=w.org.auth), "not_found"),
    "POST /v1/admin/dsar/build-one": lambda http, w: Calls(
        http.post("/v1/admin/dsar/build-one", json={}, headers=w.admin.auth),
        http.post("/v1/admin/dsar/build-one", json={}, headers=w.org.auth), "forbidden"),
    "GET /v1/models": lambda http, w: Calls(
        http.get("/v1/models", headers=w.org.auth), http.get("/v1/models", headers=NOBODY), "unauthorized"),
    "GET /v1/admin/moderation/queue": lambda http, w: Calls(
        http.get("/v1/admin/moderation/queue", headers=w.admin.auth),
        http.get("/v1/admin/moderation/queue", headers=w.org.auth), "forbidden"),
    "GET /v1/privacy/exports": lambda http, w: Calls(
        http.get("/v1/privacy/exports", headers=w.org.auth),
        http.get("/v1/privacy/exports", headers=NOBODY), "unauthorized"),
    "GET /v1/webhooks": lambda http, w: Calls(
        http.get("/v1/webhooks", params={"limit": 1}, headers=w.org.auth),
        http.get("/v1/webhooks", headers=NOBODY), "unauthorized"),
    "POST /v1/personas": lambda http, w: Calls(
        http.post("/v1/personas", json={"intent": "A calm gardener who explains compost"}, headers=w.org.auth),
        http.post("/v1/personas", json={"intent": ""}, headers=w.org.auth), "validation_failed"),
    "POST /v1/personas/{}/refine": lambda http, w: Calls(
        http.post(f"/v1/personas/{w.persona['id']}/refine",
                  json={"instruction": "Make them a little warmer", "note": "conformance"}, headers=w.org.auth),
        http.post(f"/v1/personas/{UNKNOWN}/refine", json={"instruction": "Warmer"}, headers=w.org.auth),
        "not_found"),
    "POST /v1/personas/{}/fork": lambda http, w: Calls(
        http.post(f"/v1/personas/{w.persona['id']}/fork", json={}, headers=w.org.auth),
        http.post(f"/v1/personas/{UNKNOWN}/fork", json={}, headers=w.org.auth), "not_found"),
    "POST /v1/personas/{}/audit": lambda http, w: Calls(
        http.post(f"/v1/personas/{w.persona['id']}/audit", json={}, headers=w.org.auth),
        http.post(f"/v1/personas/{UNKNOWN}/audit", json={}, headers=w.org.auth), "not_found"),
    "POST /v1/chat/sessions/{}/messages": lambda http, w: Calls(
        http.post(f"/v1/chat/sessions/{w.session['sessionId']}/messages", json={"content": "Hello there"},
                  headers=w.org.auth),
        http.post("/v1/chat/sessions/chs_nope/messages", json={"content": "Hello"}, headers=w.org.auth),
        "not_found"),
    "POST /v1/webhooks/{}/ping": lambda http, w: Calls(
        http.post(f"/v1/webhooks/{w.endpoint['id']}/ping", json={}, headers=w.org.auth),
        http.post("/v1/webhooks/whe_nope/ping", json={}, headers=w.org.auth), "not_found"),
    "POST /v1/webhooks/{}/deliveries/{}/replay": lambda http, w: Calls(
        http.post(f"/v1/webhooks/{w.endpoint['id']}/deliveries/{_delivery(http, w)}/replay", json={},
                  headers=w.org.auth),
        http.post(f"/v1/webhooks/{w.endpoint['id']}/deliveries/whd_nope/replay", json={}, headers=w.org.auth),
        "not_found"),
    "GET /v1/audit/events": lambda http, w: Calls(
        http.get("/v1/audit/events", headers=w.org.auth), http.get("/v1/audit/events", headers=NOBODY),
        "unauthorized"),
    "GET /v1/personas/{}/lineage": lambda http, w: Calls(
        http.get(f"/v1/personas/{w.persona['id']}/lineage", headers=w.org.auth),
        http.get(f"/v1/personas/{UNKNOWN}/lineage", headers=w.org.auth), "not_found"),
}


def is_json(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";")[0].strip()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def happy_findings(spec: Spec, endpoint: Endpoint, response: httpx.Response,
                   divergences: dict[str, Divergence]) -> list[Finding]:
    key = endpoint.key
    expected = endpoint.success or (200, 201)
    if response.status_code not in expected:
        return [Finding(f"live-status {key} happy", f"{response.status_code} (the spec: {expected}): "
                                                    f"{response.text[:300]}")]
    if 300 <= response.status_code < 400:
        return [] if response.headers.get("location") else [Finding(f"location {key}", "a redirect without Location")]
    if not is_json(response):
        return [Finding(f"live-json {key}", f"content type {response.headers.get('content-type')}")]
    if endpoint.resource is None:
        return []
    resource = spec.resources[endpoint.resource]
    return value_findings(resource.name, resource.fields, response.json(), divergences, resource.id_prefix)


def error_findings(spec: Spec, endpoint: Endpoint, response: httpx.Response, code: str,
                   divergences: dict[str, Divergence]) -> list[Finding]:
    key, status = endpoint.key, spec.codes[code]
    assert not endpoint.errors or status in endpoint.errors, f"{key}: pick an error the spec documents"
    if response.status_code != status:
        return [Finding(f"live-status {key} error", f"{response.status_code}, the spec: {status} `{code}`: "
                                                    f"{response.text[:300]}")]
    if not is_json(response):
        return [Finding(f"live-json {key}", f"content type {response.headers.get('content-type')}")]
    body = response.json()
    if endpoint.portrait_errors:
        found = value_findings("Portrait error", spec.resources["Portrait error"].fields, body, divergences)
        got = body.get("error") if isinstance(body, dict) else None
    else:
        error = body.get("error") if isinstance(body, dict) else None
        found = [] if isinstance(body, dict) and set(body) == {"error"} else \
            [Finding(f"envelope-extra {key}", f"keys {sorted(body) if isinstance(body, dict) else body}")]
        fields = [Field(name, "object" if name == "details" else "string", "", name != "details")
                  for name in spec.envelope]
        found += value_findings("Error envelope", fields, error, divergences)
        got = error.get("code") if isinstance(error, dict) else None
    if got != code:
        found.append(Finding(f"live-code {key}", f"`{got}`, the spec: `{code}`"))
    return found


def header_findings(spec: Spec, key: str, responses: Iterable[httpx.Response]) -> list[Finding]:
    return [Finding(f"header {header}", f"missing on {key} ({r.status_code})")
            for r in responses for header in spec.every_answer_headers if header not in r.headers]


@pytest.fixture(scope="module")
def live(http, world, spec, divergences) -> dict[str, list[Finding]]:
    """Every operation's findings, called once (the stale-entry check needs them all)."""
    found = {}
    for key, endpoint in spec.endpoints.items():
        case = CASES.get(key)
        if case is None:
            found[key] = [Finding(f"live-case {key}", "the spec names this operation: add its calls to CASES")]
            continue
        calls = case(http, world)
        found[key] = happy_findings(spec, endpoint, calls.happy, divergences) + \
            error_findings(spec, endpoint, calls.error, calls.code, divergences) + \
            header_findings(spec, key, (calls.happy, calls.error))
    # Tables no endpoint row answers with, read live too.
    ping = ok(http.post(f"/v1/webhooks/{world.endpoint['id']}/ping", json={}, headers=world.org.auth))
    event = ok(http.get(route("GetEvent", ping["eventId"]), headers=world.org.auth))
    key = ok(http.post("/v1/keys", json={"name": "conformance", "scopes": ["chat:read"]}, headers=world.org.auth))
    found["tables"] = value_findings("Event envelope", spec.resources["Event envelope"].fields, event, divergences) + \
        value_findings("API key", spec.resources["API key"].fields, key["key"], divergences)
    return found


def test_every_case_is_a_spec_operation(spec):
    assert set(CASES) <= set(spec.endpoints), set(CASES) - set(spec.endpoints)


@pytest.mark.parametrize("key", sorted(spec_doc.load().endpoints))
def test_live_answers_match_the_spec(key, live, divergences):
    problems = unexpected(live[key], divergences)
    assert not problems, explain(problems)


def test_live_resources_without_an_endpoint_row(live, divergences):
    problems = unexpected(live["tables"], divergences)
    assert not problems, explain(problems)


def test_a_planted_live_divergence_fails(spec, divergences):
    """The live checks catch a field removed, a type changed and a wrong error body."""
    fields = spec.resources["Chat session"].fields
    body = {f.name: ("x" if f.type == "string" else 1) for f in fields} | {"sessionId": "chs_1", "status": "active"}
    assert value_findings("Chat session", fields, body, divergences, "chs_") == []
    broken = {k: v for k, v in body.items() if k != "title"} | {"messageCount": "3", "status": "paused"}
    found = {f.id for f in value_findings("Chat session", fields, broken, divergences, "chs_")}
    assert found == {"absent Chat session.title", "type Chat session.messageCount", "choices Chat session.status"}
    event = {"id": "msg_1", "type": "audit.test_failed", "occurredAt": "2026-11-25T12:00:00+02:00", "orgId": "org_1",
             "workspaceId": "ws_1", "data": {}}
    found = {f.id for f in value_findings("Event envelope", spec.resources["Event envelope"].fields, event, divergences)}
    assert found == {"form Event envelope.id", "choices Event envelope.type", "format Event envelope.occurredAt"}
    endpoint = spec.endpoints["GET /v1/orgs/{}"]
    wrong = httpx.Response(404, json={"error": {"code": "missing", "message": "no"}, "extra": 1})
    found = {f.id for f in error_findings(spec, endpoint, wrong, "not_found", divergences)}
    assert found == {"envelope-extra GET /v1/orgs/{}", "live-code GET /v1/orgs/{}"}
    bare = httpx.Response(200, headers={spec.every_answer_headers[0]: "60"})
    assert {f.id for f in header_findings(spec, endpoint.key, [bare])} == \
        {f"header {h}" for h in spec.every_answer_headers[1:]}


def test_every_divergence_is_still_true(spec, openapi, divergences, live):
    """An entry no finding matches any more is stale: remove it."""
    found = {f.id for f in openapi_findings(spec, openapi, divergences)} | \
        {f.id for findings in live.values() for f in findings}
    descriptive = {f"named {r.name}.{f.name}" for r in spec.resources.values() for f in r.fields
                   if f.type not in JSON_TYPES}
    stale = sorted(set(divergences) - found - descriptive)
    assert not stale, f"divergences no longer found (remove them from tests/spec_divergences.toml): {stale}"
