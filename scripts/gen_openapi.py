"""The OpenAPI 3.1 document of the HTTP/JSON edge, from the protos.

Run by scripts/gen_proto.py (which writes gen/openapi.json and checks it for
drift): `python scripts/gen_openapi.py DESCRIPTOR_WITH_SOURCE_INFO OUT.json`,
with the freshly generated Python code first on PYTHONPATH so the project's
own options (policy, field rules, the error catalogue) are read as they are
declared now.

What it states, all from the descriptors: every `google.api.http` binding
(additional bindings too) as an operation; path and query parameters and the
body as the transcoder binds them, by JSON name; field rules as JSON Schema
constraints (required, lengths, ranges, allowed values); field behaviours
(REQUIRED, OUTPUT_ONLY as readOnly); enums by value name; the proto3 JSON
mapping of the well-known types (Timestamp as date-time, int64 as a string,
Struct as an object, ...); bearer security except on anonymous RPCs, and
`x-platform-admin: true` on the platform administrators' RPCs; the
success answer by response kind (JSON, 307 with Location, a raw body, SCIM's
media type, server-sent events for streams) and the declared success status;
every error status of the catalogue with its body in the RPC's error shape
(the envelope, the portrait shape for the statuses the spec gives it, SCIM's
schema), one component per shape and status that every operation reuses,
the edge's own answers among them (400, 405 with Allow, 408, 426, 431; 413
and 415 where the operation takes a body); the headers clients code against,
declared once (components/headers, components/parameters) and referenced
where the API sends or reads them: `Idempotency-Key` on the operations that
honour it, `X-Request-Id` on every answer, the rate-limit headers on every
answer the server makes (the edge's own carry none), `Retry-After`,
`Location`, `X-Run-Id` on streams; the proto comments as
descriptions, without their maintainers' notes (`(-- ... --)`,
scripts/proto_comments.py); and, for the main operations, an example request
and answer (`example` of their JSON media types), from the table
scripts/openapi_examples.json (by operationId; tests/docs/test_openapi_examples.py
validates each against its schema and sends it through Envoy).
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from functools import cache
from typing import Any

from google.api import annotations_pb2, field_behavior_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
from persona.v1 import errors_pb2, options_pb2
from persona_service.chat.openai_errors import OPENAI_CODES
from persona_service.portraits.module import PORTRAIT_STATUSES
from proto_comments import user_text

PACKAGE = "persona.v1"
SCIM = "application/scim+json"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
_VARIABLE = re.compile(r"\{([^}=]+)(?:=[^}]*)?\}")
EXAMPLES = pathlib.Path(__file__).with_name("openapi_examples.json")

# The proto3 JSON mapping of the well-known types.
WELL_KNOWN: dict[str, dict[str, Any]] = {
    ".google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    ".google.protobuf.Duration": {"type": "string", "pattern": r"^-?\d+(\.\d+)?s$"},
    ".google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    ".google.protobuf.Value": {},
    ".google.protobuf.ListValue": {"type": "array", "items": {}},
    ".google.protobuf.Empty": {"type": "object"},
    ".google.protobuf.FieldMask": {"type": "string"},
    ".google.protobuf.StringValue": {"type": ["string", "null"]},
    ".google.protobuf.BoolValue": {"type": ["boolean", "null"]},
    ".google.protobuf.Int32Value": {"type": ["integer", "null"], "format": "int32"},
    ".google.protobuf.Int64Value": {"type": ["string", "null"], "format": "int64"},
    ".google.protobuf.DoubleValue": {"type": ["number", "null"]},
    ".google.protobuf.Any": {"type": "object", "additionalProperties": True},
}
SCALARS = {
    F.TYPE_STRING: {"type": "string"},
    F.TYPE_BOOL: {"type": "boolean"},
    F.TYPE_INT32: {"type": "integer", "format": "int32"},
    F.TYPE_SINT32: {"type": "integer", "format": "int32"},
    F.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    F.TYPE_UINT32: {"type": "integer", "format": "int64", "minimum": 0},
    F.TYPE_FIXED32: {"type": "integer", "format": "int64", "minimum": 0},
    # 64-bit integers are strings in proto3 JSON (numbers are accepted too).
    F.TYPE_INT64: {"type": ["string", "integer"], "format": "int64"},
    F.TYPE_SINT64: {"type": ["string", "integer"], "format": "int64"},
    F.TYPE_SFIXED64: {"type": ["string", "integer"], "format": "int64"},
    F.TYPE_UINT64: {"type": ["string", "integer"], "format": "uint64"},
    F.TYPE_FIXED64: {"type": ["string", "integer"], "format": "uint64"},
    F.TYPE_DOUBLE: {"type": "number", "format": "double"},
    F.TYPE_FLOAT: {"type": "number", "format": "float"},
    F.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}


class Index:
    """Messages, enums and comments of a descriptor set, by full name."""

    def __init__(self, files: descriptor_pb2.FileDescriptorSet):
        self.messages: dict[str, descriptor_pb2.DescriptorProto] = {}
        self.enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}
        self.comments: dict[tuple[str, tuple[int, ...]], str] = {}
        self.files = list(files.file)
        self.message_paths: dict[str, tuple[str, tuple[int, ...]]] = {}
        for file in files.file:
            for location in file.source_code_info.location:
                text = user_text(location.leading_comments)
                if text:
                    self.comments[(file.name, tuple(location.path))] = text
            for i, message in enumerate(file.message_type):
                self._add(file, f".{file.package}", message, (4, i))
            for enum in file.enum_type:
                self.enums[f".{file.package}.{enum.name}"] = enum
        self.request_messages = self._reachable(
            method.input_type for file in self.files for service in file.service for method in service.method)

    def _reachable(self, roots) -> set[str]:
        """Every message a request can carry, nested ones included."""
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in seen or name not in self.messages:
                continue
            seen.add(name)
            todo += [f.type_name for f in self.messages[name].field if f.type == F.TYPE_MESSAGE]
        return seen

    def _add(self, file, prefix: str, message, path: tuple[int, ...]) -> None:
        name = f"{prefix}.{message.name}"
        self.messages[name] = message
        self.message_paths[name] = (file.name, path)
        for i, nested in enumerate(message.nested_type):
            self._add(file, name, nested, (*path, 3, i))
        for enum in message.enum_type:
            self.enums[f"{name}.{enum.name}"] = enum

    def comment(self, file: str, path: tuple[int, ...]) -> str:
        return self.comments.get((file, path), "")


def schema_name(full_name: str) -> str:
    parts = full_name.lstrip(".").split(".")
    return "".join(p for p in parts if p not in ("persona", "v1")) if full_name.startswith(f".{PACKAGE}.") \
        else "_".join(parts)


class Schemas:
    """components/schemas, built as messages are referenced."""

    def __init__(self, index: Index):
        self.index = index
        self.defined: dict[str, dict[str, Any]] = {}

    def ref(self, full_name: str, *, without: frozenset[str] = frozenset()) -> dict[str, Any]:
        if full_name in WELL_KNOWN:
            return dict(WELL_KNOWN[full_name])
        name = schema_name(full_name) + ("Body" if without else "")
        if name not in self.defined:
            self.defined[name] = {}  # recursion guard
            self.defined[name] = self.message(full_name, without)
        return {"$ref": f"#/components/schemas/{name}"}

    def message(self, full_name: str, without: frozenset[str] = frozenset()) -> dict[str, Any]:
        message = self.index.messages[full_name]
        if full_name == ".google.api.HttpBody":
            return {"type": "string", "description": "The raw body, with its own content type."}
        file, path = self.index.message_paths[full_name]
        properties, required = {}, []
        # What the API answers always carries every field (the servicers fill
        # each one; a not-yet timestamp is a present `null`), bar the optional
        # and oneof ones; schemathesis and the spec conformance test check it.
        answer_only = full_name not in self.index.request_messages
        for i, field in enumerate(message.field):
            if field.name in without:
                continue
            prop = self.field(field)
            description = self.index.comment(file, (*path, 2, i))
            if description:
                prop["description"] = description
            properties[field.json_name] = prop
            behaviors = field.options.Extensions[field_behavior_pb2.field_behavior]
            rules = field.options.Extensions[options_pb2.rules]
            if field_behavior_pb2.REQUIRED in behaviors or rules.required or (
                    answer_only and not field.HasField("oneof_index")):
                required.append(field.json_name)
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        description = self.index.comment(file, path)
        if description:
            schema["description"] = description
        return schema

    def field(self, field: descriptor_pb2.FieldDescriptorProto) -> dict[str, Any]:
        if field.type == F.TYPE_MESSAGE and field.label == F.LABEL_REPEATED:
            entry = self.index.messages.get(field.type_name)
            if entry is not None and entry.options.map_entry:
                return {"type": "object", "additionalProperties": self.field(entry.field[1])}
        if field.type == F.TYPE_MESSAGE and field.type_name == ".google.protobuf.Value" and field.name.endswith("_at"):
            # A timestamp that may not have happened yet: always present, `null`
            # until then (docs/contract-decisions.md), hence a Value.
            item = {"type": ["string", "null"], "format": "date-time"}
        elif field.type == F.TYPE_MESSAGE:
            item = self.ref(field.type_name)
        elif field.type == F.TYPE_ENUM:
            enum = self.index.enums[field.type_name]
            item = {"type": "string", "enum": [v.name for v in enum.value]}
        else:
            item = dict(SCALARS[field.type])
        rules = field.options.Extensions[options_pb2.rules]
        if field.label == F.LABEL_REPEATED:
            schema: dict[str, Any] = {"type": "array", "items": self._constrained(item, rules, element=True)}
            if rules.min_len or rules.required:
                schema["minItems"] = max(rules.min_len, 1 if rules.required else 0)
            if rules.max_len:
                schema["maxItems"] = rules.max_len
            if rules.unique:
                schema["uniqueItems"] = True
        else:
            schema = self._constrained(item, rules, element=False)
        behaviors = field.options.Extensions[field_behavior_pb2.field_behavior]
        if field_behavior_pb2.OUTPUT_ONLY in behaviors:
            schema["readOnly"] = True
        return schema

    def _constrained(self, item: dict[str, Any], rules, *, element: bool) -> dict[str, Any]:
        item = dict(item)
        kind = item.get("type")
        if kind == "string" and "$ref" not in item:
            if not element and rules.min_len:
                item["minLength"] = rules.min_len
            if not element and rules.max_len:
                item["maxLength"] = rules.max_len
            allowed = list(rules.one_of)
            if rules.one_of_enum:
                allowed += self._wire_names(rules.one_of_enum)
            if allowed:
                item["enum"] = allowed
        if kind in ("integer", "number") and not element:
            if rules.HasField("min_value"):
                item["minimum"] = rules.min_value
            if rules.HasField("max_value"):
                item["maximum"] = rules.max_value
        return item

    def _wire_names(self, enum_full_name: str) -> list[str]:
        enum = self.index.enums[f".{enum_full_name}"]
        return [v.options.Extensions[options_pb2.wire_name] for v in enum.value
                if v.options.HasExtension(options_pb2.wire_name)]


@cache
def catalogue() -> list[tuple[str, int, str]]:
    """(code, HTTP status, message) of every catalogue entry."""
    found = []
    for value in errors_pb2.ErrorCode.DESCRIPTOR.values:
        if value.GetOptions().HasExtension(options_pb2.error):
            spec = value.GetOptions().Extensions[options_pb2.error]
            found.append((spec.code, spec.http_status, spec.message))
    return found


def error_components() -> dict[str, dict[str, Any]]:
    codes = sorted({code for code, _, _ in catalogue()})
    error = {"type": "object", "required": ["code", "message", "details"], "properties": {
        "code": {"type": "string", "enum": codes, "description": "Stable machine-readable code (the catalogue)."},
        "message": {"type": "string"},
        "details": {"type": "object", "additionalProperties": True},
    }}
    return {
        "ErrorObject": error,
        "ErrorEnvelope": {"type": "object", "required": ["error"], "properties": {
            "error": {"$ref": "#/components/schemas/ErrorObject"}},
            "description": "The documented error envelope."},
        "PortraitError": {"type": "object", "required": ["error", "message"], "additionalProperties": True,
                          "properties": {"error": {"type": "string", "enum": codes}, "message": {"type": "string"},
                                         "used": {"type": "number"}, "limit": {"type": "number"},
                                         "pii": {"type": "array", "items": {"type": "string"}},
                                         "term": {"type": "string"}, "scores": {"type": "object"},
                                         "provider": {"type": "string"}},
                          "description": "The portrait edit's error shape: the code, the message and the details "
                                         "flattened (`used`, `limit`, `pii`, `term`, `scores`, `provider`)."},
        "OpenAIErrorObject": {"type": "object", "required": ["code", "message", "details", "type", "param"],
                              "properties": {**error["properties"],
                                             "code": {"type": "string", "enum": sorted({*codes, *OPENAI_CODES}),
                                                      "description": "The catalogue's code, or OpenAI's own "
                                                                     "(`model_not_found`)."},
                                             "type": {"type": "string", "description": "OpenAI's error type."},
                                             "param": {"type": ["string", "null"],
                                                       "description": "The first invalid field, else null."}}},
        "OpenAIError": {"type": "object", "required": ["error"], "properties": {
            "error": {"$ref": "#/components/schemas/OpenAIErrorObject"}},
            "description": "The OpenAI-compatible endpoints' errors: the envelope plus OpenAI's `type` and "
                           "`param`, which OpenAI's clients show."},
        "ScimError": {"type": "object", "required": ["schemas", "status", "detail"], "properties": {
            "schemas": {"type": "array", "items": {"type": "string", "const": ERROR_SCHEMA}},
            "status": {"type": "string"}, "scimType": {"type": "string"}, "detail": {"type": "string"},
            "error": {"$ref": "#/components/schemas/ErrorObject"}},
            "description": "SCIM's error schema (RFC 7644 §3.12); 422 answers carry the envelope's `error` too."},
    }


# The answers the edge (Envoy) makes itself, before any server, by status: what they mean (after the
# catalogue codes), and whether they apply to every operation or only to those that take a body.
EDGE_ANSWERS: dict[int, tuple[str, bool]] = {
    400: ("The edge's answer too: a body that is not valid JSON or not an object, a body field or query "
          "parameter the request does not have, a URL that is not UTF-8 once decoded.", False),
    405: ("The edge's answer: the path takes other methods, listed in the Allow header.", False),
    408: ("The edge's answer: the request was not received in time.", False),
    413: ("The edge's answer: a body over 4 MiB.", True),
    415: ("The edge's answer: a JSON body sent as another media type (or a charset other than UTF-8), "
          "or gRPC-Web.", True),
    426: ("The edge's answer: an HTTP/1.0 request (use HTTP/1.1 or HTTP/2).", False),
    431: ("The edge's answer: a URL over 8 KiB, or headers over 60 KiB in all.", False),
}
ALLOW = {"Allow": {"description": "The methods the path takes.", "schema": {"type": "string"}}}
# Statuses only the edge answers (no server sees the request): they carry no rate-limit headers.
EDGE_ONLY = frozenset({408, 413, 415, 426, 431})

_INTEGER = {"type": "integer", "minimum": 0}
# The headers clients code against, declared once (components/headers).
HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {"required": True, "schema": {"type": "string"}, "description":
                     "The request's id: the `X-Request-Id` you sent when it is 1 to 128 of `A-Z a-z 0-9 . _ : @ / + "
                     "= -`, else one the API made (a UUID). Every answer carries it, the edge's own included; quote "
                     "it when you report a problem."},
    "X-RateLimit-Limit": {"schema": _INTEGER, "description":
                          "Requests allowed per minute: your organization's limit (its plan's, or an Enterprise "
                          "override); for calls without a credential, or with one that failed, your client "
                          "address's. Every answer the API makes carries the rate-limit headers; the edge's own "
                          "answers (no such path, a method the path does not take, a body it cannot read or over "
                          "the limit) count against no window and carry none, and none are sent while limits "
                          "cannot be checked (calls are then not limited)."},
    "X-RateLimit-Remaining": {"schema": _INTEGER, "description":
                              "Requests left in the current minute window. It never rises within a window, and "
                              "stays 0 after a 429 until the window resets."},
    "X-RateLimit-Reset": {"schema": _INTEGER, "description":
                          "When the current minute window resets, as Unix time in seconds."},
    "X-Service-Plan-Window-Seconds": {"schema": _INTEGER, "description":
                                      "The length in seconds of the window `X-RateLimit-Limit` counts (60)."},
    "RateLimit-Policy": {"schema": {"type": "string"}, "description":
                         "The windows that apply, in the IETF RateLimit header fields' syntax: "
                         "`\"minute\";q=<limit>;w=60, \"day\";q=<limit>;w=86400`."},
    "RateLimit": {"schema": {"type": "string"}, "description":
                  "The minute window as it stands, in the IETF RateLimit header fields' syntax: "
                  "`\"minute\";r=<remaining>;t=<seconds until it resets>`."},
    "Retry-After": {"schema": {"type": "string"}, "description":
                    "When to retry: a number of seconds, or an HTTP-date (429 `quota_exceeded`: the end of the "
                    "organization's billing period). Retry no sooner."},
    "Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true"]}, "description":
                            "`true`: this is the stored answer to an earlier request with the same "
                            "`Idempotency-Key` (kept 24 hours); the operation did not run again."},
    "X-Run-Id": {"required": True, "schema": {"type": "string"}, "description":
                 "The stream's run. Each event's `id` is `<run>.<sequence>`: send the last one you received as "
                 "`Last-Event-ID` to resume the stream where it stopped, from any connection."},
    "Location": {"required": True, "schema": {"type": "string", "format": "uri"}, "description":
                 "Where the resource is: follow it (or read it from a HEAD request)."},
    "Created-Location": {"required": True, "schema": {"type": "string", "format": "uri"}, "description":
                         "The URI of the resource created."},
}
RATE_LIMIT = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Service-Plan-Window-Seconds",
              "RateLimit-Policy", "RateLimit")
# The statuses that may say when to retry (409: an `Idempotency-Key` whose first request is still running).
RETRY_AFTER = frozenset({409, 429, 502, 503, 504})
PARAMETERS: dict[str, dict[str, Any]] = {
    "IdempotencyKey": {
        "name": "Idempotency-Key", "in": "header", "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"},
        "description": "Makes a retry safe: a request repeated with the same key (1 to 255 printable ASCII "
                       "characters, e.g. a UUID) within 24 hours gets the first one's answer again, with "
                       "`Idempotent-Replayed: true`, and the operation runs once. A key belongs to the "
                       "organization (any of its credentials; the caller's workspace is part of the request). "
                       "The same key with another request, or while the first one is still running, is 409 "
                       "`idempotency_conflict`. Kept: a success, or a refusal that committed changes; any other "
                       "error frees the key, and a retry with it runs again."},
}


def headers(*names: str) -> dict[str, Any]:
    """References to components/headers."""
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def answer_headers(status: int) -> dict[str, Any]:
    """The headers of an answer with this status, whichever operation gave it."""
    found = headers("X-Request-Id")
    if status not in EDGE_ONLY:
        found |= headers(*RATE_LIMIT)
    if status in RETRY_AFTER:
        found |= headers("Retry-After")
    return found


def idempotent(method, policy) -> bool:
    """Whether the API honours an `Idempotency-Key`: a write by a caller
    (anonymous requests read none); a stream's replay follows its first
    request's run (kernel.transport.stages.idempotency)."""
    return policy.write and not policy.anonymous


SHAPES = {options_pb2.ERROR_SHAPE_UNSPECIFIED: "Envelope", options_pb2.ERROR_SHAPE_ENVELOPE: "Envelope",
          options_pb2.ERROR_SHAPE_PORTRAIT: "Portrait", options_pb2.ERROR_SHAPE_SCIM: "Scim",
          options_pb2.ERROR_SHAPE_OPENAI: "OpenAI"}


def error_refs(shape: int, takes_body: bool) -> dict[str, Any]:
    """An operation's error answers: references to components/responses (the
    portrait shape's statuses in it, the others in the envelope; the edge's
    413 and 415 only where the operation takes a body)."""
    refs = {}
    for status in error_responses(options_pb2.ERROR_SHAPE_UNSPECIFIED):
        if EDGE_ANSWERS.get(int(status), ("", False))[1] and not takes_body:
            continue
        named = shape if shape != options_pb2.ERROR_SHAPE_PORTRAIT or int(status) in PORTRAIT_STATUSES \
            else options_pb2.ERROR_SHAPE_ENVELOPE
        refs[status] = {"$ref": f"#/components/responses/{SHAPES[named]}{status}"}
    return refs


def all_error_responses() -> dict[str, Any]:
    return {f"{name}{status}": response for shape, name in SHAPES.items() if shape
            for status, response in error_responses(shape).items()}


def error_responses(shape: int) -> dict[str, Any]:
    by_status: dict[int, list[str]] = {}
    for code, status, _ in catalogue():
        by_status.setdefault(status, []).append(code)
    # The edge's own replies: no such path, a method the path does not take.
    by_status.setdefault(404, [])
    body = {options_pb2.ERROR_SHAPE_PORTRAIT: ("application/json", "PortraitError"),
            options_pb2.ERROR_SHAPE_SCIM: (SCIM, "ScimError"),
            options_pb2.ERROR_SHAPE_OPENAI: ("application/json", "OpenAIError")}.get(shape, ("application/json", "ErrorEnvelope"))
    responses = {}
    for status, codes in sorted(by_status.items()):
        if shape == options_pb2.ERROR_SHAPE_PORTRAIT and status not in PORTRAIT_STATUSES:
            continue  # the envelope's
        description = ", ".join(f"`{c}`" for c in sorted(codes)) or "No such endpoint."
        if status in EDGE_ANSWERS:
            description += ". " + EDGE_ANSWERS[status][0]
        responses[str(status)] = {"description": description,
                                  "headers": {**answer_headers(status), **(ALLOW if status == 405 else {})},
                                  "content": {body[0]: {"schema": {"$ref": f"#/components/schemas/{body[1]}"}}}}
    return responses


def _template(rule) -> tuple[str, str] | None:
    kind = rule.WhichOneof("pattern")
    if kind is None or kind == "custom":
        return None
    return kind, getattr(rule, kind)


def tags(index: Index) -> list[dict[str, str]]:
    """One tag per service, its comment the description (the resource's states,
    limits and events that each operation refers to)."""
    found = []
    for file in index.files:
        if file.package == PACKAGE:
            for s_index, service in enumerate(file.service):
                description = index.comment(file.name, (6, s_index))
                found.append({"name": tag_name(service), **({"description": description} if description else {})})
    return sorted(found, key=lambda tag: tag["name"])


def tag_name(service: descriptor_pb2.ServiceDescriptorProto) -> str:
    return service.name.removesuffix("Service")


def operations(index: Index, schemas: Schemas) -> dict[str, dict[str, Any]]:
    paths: dict[str, dict[str, Any]] = {}
    ids: set[str] = set()
    for file in index.files:
        if file.package != PACKAGE:
            continue
        for s_index, service in enumerate(file.service):
            tag = tag_name(service)
            for m_index, method in enumerate(service.method):
                rule = method.options.Extensions[annotations_pb2.http]
                policy = method.options.Extensions[options_pb2.policy]
                description = index.comment(file.name, (6, s_index, 2, m_index))
                for n, binding in enumerate([rule, *rule.additional_bindings]):
                    found = _template(binding)
                    if found is None:
                        continue
                    verb, template = found
                    operation_id = method.name if n == 0 else f"{method.name}{n + 1}"
                    if operation_id in ids:
                        operation_id = f"{service.name}_{operation_id}"
                    ids.add(operation_id)
                    path = _VARIABLE.sub(lambda m: "{" + m.group(1) + "}", template)
                    operation = operation_for(index, schemas, method, policy, binding, template, tag, description)
                    operation["operationId"] = operation_id
                    paths.setdefault(path, {})[verb] = operation
    return paths


def operation_for(index: Index, schemas: Schemas, method, policy, binding, template: str, tag: str,
                  description: str) -> dict[str, Any]:
    request = index.messages[method.input_type]
    by_name = {f.name: f for f in request.field}
    path_fields = [m.group(1) for m in _VARIABLE.finditer(template)]
    parameters = []
    for name in path_fields:
        field = by_name[name.split(".")[0]]
        parameters.append({"name": name, "in": "path", "required": True, "schema": schemas.field(field)})
    body = binding.body
    if body != "*":
        for field in request.field:
            if field.name in path_fields or field.name == body:
                continue
            is_scalar = field.type not in (F.TYPE_MESSAGE,) or field.type_name in WELL_KNOWN
            if is_scalar:
                parameters.append({"name": field.json_name, "in": "query", "required": False,
                                   "schema": schemas.field(field)})
    operation: dict[str, Any] = {"tags": [tag], "summary": description.split(". ")[0][:120] if description else "",
                                 "description": description}
    if idempotent(method, policy):
        parameters.append({"$ref": "#/components/parameters/IdempotencyKey"})
    if parameters:
        operation["parameters"] = parameters
    if body == "*":
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": schemas.ref(method.input_type, without=frozenset(path_fields))}}}
    elif body:
        field = by_name[body]
        if field.type_name == ".google.api.HttpBody":
            types = [SCIM, "application/json"] if policy.error_shape == options_pb2.ERROR_SHAPE_SCIM else ["*/*"]
            operation["requestBody"] = {"required": True, "content": {t: {"schema": {}} for t in types}}
        else:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": schemas.field(field)}}}
    operation["responses"] = {**success(schemas, method, policy), **error_refs(policy.error_shape, bool(body))}
    if not policy.anonymous:
        operation["security"] = [{"bearer": []}]
    else:
        operation["security"] = []
    if policy.platform_admin:
        # The operator's, not a tenant's: the SDKs leave such operations out (`client.request` reaches them).
        operation["x-platform-admin"] = True
    return operation


def success(schemas: Schemas, method, policy) -> dict[str, Any]:
    """The success answer, with the headers every answer of the API carries."""
    answers = _success(schemas, method, policy)
    common = headers("X-Request-Id", *RATE_LIMIT)
    if idempotent(method, policy):
        common |= headers("Idempotent-Replayed")
    for answer in answers.values():
        answer["headers"] = {**common, **answer.get("headers", {})}
    return answers


def _success(schemas: Schemas, method, policy) -> dict[str, Any]:
    status = str(policy.success_status or 200)
    if method.server_streaming and policy.response != options_pb2.RESPONSE_KIND_RAW_BODY:  # (a raw one: a download)
        # The schema of one event: `data` is a JSON message (the end event's, `{"status": …}`).
        event = {"type": "object", "required": ["data"], "properties": {
            "id": {"type": "string", "description": "`<run>.<sequence>`: send it back as `Last-Event-ID` to resume."},
            "event": {"type": "string"},
            "data": {"type": "string", "contentMediaType": "application/json"},
        }}
        return {"200": {"description": "Server-sent events: one event per message of "
                                       f"`{schema_name(method.output_type)}` (with `id:` to resume with "
                                       "`Last-Event-ID`), then an `end` event.",
                        "headers": headers("X-Run-Id"), "content": {"text/event-stream": {"schema": event}}}}
    if policy.response == options_pb2.RESPONSE_KIND_REDIRECT:
        return {"307": {"description": "A redirect to the resource.", "headers": headers("Location")}}
    if policy.response == options_pb2.RESPONSE_KIND_RAW_BODY:
        if status == "204":
            return {"204": {"description": "No content."}}
        scim = policy.error_shape == options_pb2.ERROR_SHAPE_SCIM
        content = {SCIM: {"schema": {"type": "object"}}} if scim else {"*/*": {"schema": {}}}
        answer: dict[str, Any] = {"description": "The raw body.", "content": content}
        if scim:
            answer["headers"] = {"ETag": {"schema": {"type": "string"}}}
            if status == "201":
                answer["headers"] |= {"Location": {"$ref": "#/components/headers/Created-Location"}}
        return {status: answer}
    return {status: {"description": "OK.", "content": {"application/json": {"schema": schemas.ref(method.output_type)}}}}


def add_examples(paths: dict[str, dict[str, Any]], examples: dict[str, dict[str, Any]]) -> None:
    """Each listed operation's example: `request`, its JSON body; `response`, its success answer."""
    by_id = {operation["operationId"]: operation for item in paths.values() for operation in item.values()}
    for operation_id, example in examples.items():
        if operation_id.startswith("//"):
            continue  # the table's own notes
        operation = by_id[operation_id]  # (a KeyError: an example of an operation that is gone)
        values = {**example.get("parameters", {}), **example.get("query", {})}
        for parameter in operation.get("parameters", []):
            if parameter.get("name") in values:
                parameter["example"] = values[parameter["name"]]
        if "request" in example:
            operation["requestBody"]["content"]["application/json"]["example"] = example["request"]
        (answer,) = (answer for status, answer in operation["responses"].items() if status < "400")
        answer["content"]["application/json"]["example"] = example["response"]


def build(files: descriptor_pb2.FileDescriptorSet, version: str) -> dict[str, Any]:
    index = Index(files)
    schemas = Schemas(index)
    paths = operations(index, schemas)
    add_examples(paths, json.loads(EXAMPLES.read_text(encoding="utf-8")))
    used = {operation["tags"][0] for item in paths.values() for operation in item.values()}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Persona Service", "version": version,
                 "description": "Multi-tenant API for AI personas."},
        "servers": [{"url": "http://127.0.0.1:8080", "description": "`make up`"}],
        "security": [{"bearer": []}],
        "tags": [tag for tag in tags(index) if tag["name"] in used],
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description":
                                           "An API key (`sk_live_…`, `sk_test_…`), a session JWT, or a SCIM token."}},
            "schemas": {**dict(sorted(schemas.defined.items())), **error_components()},
            "responses": all_error_responses(),
            "headers": HEADERS,
            "parameters": PARAMETERS,
        },
    }


def main() -> None:
    source, out = sys.argv[1], sys.argv[2]
    files = descriptor_pb2.FileDescriptorSet.FromString(open(source, "rb").read())
    version = sys.argv[3] if len(sys.argv) > 3 else "0.1.0"
    with open(out, "w") as handle:
        json.dump(build(files, version), handle, indent=1, sort_keys=False)
        handle.write("\n")


if __name__ == "__main__":
    main()
