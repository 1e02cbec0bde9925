"""Render the Envoy configuration from edge/envoy.yaml.in (the one source)."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from string import Template
from typing import NotRequired, Required, TypedDict

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from persona.v1 import options_pb2

from persona_service.kernel.errors import CATALOGUE
from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.transport.body_keys import free_form_keys
from persona_service.kernel.transport.errors import shaped_body
from persona_service.kernel.transport.policy import find_services

ROOT = pathlib.Path(__file__).resolve().parents[3]
EDGE = ROOT / "edge"
DESCRIPTOR = ROOT / "gen" / "descriptor.binpb"

# What a request's URL (path and query) and its headers in all (URL
# included) may take at the edge; beyond, 431 `headers_too_large`. The URL
# limit is envelope.lua's MAX_URL_BYTES; the servers accept more metadata
# than the edge forwards (process/server.py).
EDGE_URL_BYTES = 8192
EDGE_HEADERS_KB = 60

# Envoy's own replies (no route, a body the transcoder cannot parse, the
# backend down): status -> envelope code and a fixed, leak-free message.
LOCAL_REPLIES = {
    # The transcoder's own reason names the field or parameter it could not
    # bind (e.g. "INVALID_ARGUMENT:scopes: ..."); it carries no internals.
    # envelope.lua rewords some (reword_bad_request).
    400: ("bad_request", "The request is malformed: %LOCAL_REPLY_BODY%"),
    404: ("not_found", "No such endpoint."),
    405: ("method_not_allowed", CATALOGUE["method_not_allowed"].message),
    408: ("request_timeout", CATALOGUE["request_timeout"].message),
    413: ("payload_too_large", CATALOGUE["payload_too_large"].message + " At most 4 MiB."),
    # The Lua's reason (gRPC-Web, a JSON body sent as something else).
    415: ("unsupported_media_type", CATALOGUE["unsupported_media_type"].message + " %LOCAL_REPLY_BODY%"),
    431: ("headers_too_large", CATALOGUE["headers_too_large"].message
          + f" At most {EDGE_URL_BYTES} bytes of URL and {EDGE_HEADERS_KB} KiB of headers in all."),
    # HTTP/1.0, refused by Envoy's codec before any filter runs.
    426: ("upgrade_required", CATALOGUE["upgrade_required"].message),
    500: ("internal_error", CATALOGUE["internal_error"].message),
    502: ("service_unavailable", CATALOGUE["service_unavailable"].message),
    503: ("service_unavailable", CATALOGUE["service_unavailable"].message),
    504: ("service_unavailable", CATALOGUE["service_unavailable"].message),
}
# Envoy's own 502/503/504 (no backend in rotation, a backend gone mid-call,
# none answering in time) are as retryable as the servers' outage 503s: they
# say when to retry too (transport/outages.py).
RETRY_AFTER = {status: {"retry-after": "1"} for status in (502, 503, 504)}
# A protocol upgrade (WebSocket) Envoy refuses with a bare 403, which would
# read as a credential problem: answered as 400 instead.
UPGRADE_REFUSED = (403, 400, "bad_request",
                   "WebSocket and other protocol upgrades are not served; streams are server-sent events "
                   "(`?stream=true`).")
# Any other status Envoy answers itself (none known; a new version may add
# some) keeps its status, in the envelope.
LOCAL_REPLY_FALLBACKS = ((500, "internal_error", CATALOGUE["internal_error"].message),
                         (400, "bad_request", "The request was refused (%RESPONSE_CODE_DETAILS%)."))


# The fragments of Envoy's configuration written here (as JSON, YAML's flow style), by the fields of their
# protos (envoy.config.accesslog.v3.AccessLogFilter, envoy.config.route.v3.Route...) that the edge sets. A
# fragment of a proto `oneof` (a filter, a string match) holds one of its keys.
class _Regex(TypedDict):
    regex: str


class _StringMatch(TypedDict, total=False):
    prefix: str
    safe_regex: _Regex


class _HeaderMatcher(TypedDict, total=False):
    name: Required[str]
    string_match: _StringMatch
    present_match: bool
    invert_match: bool


class _HeaderFilter(TypedDict):
    header: _HeaderMatcher


class _RuntimeUInt32(TypedDict):
    default_value: int
    runtime_key: str


class _Comparison(TypedDict):
    op: str  # "EQ", "GE"
    value: _RuntimeUInt32


class _StatusCodeFilter(TypedDict):
    comparison: _Comparison


class _Filters(TypedDict):
    filters: list[_AccessLogFilter]


class _AccessLogFilter(TypedDict, total=False):
    header_filter: _HeaderFilter
    status_code_filter: _StatusCodeFilter
    and_filter: _Filters
    or_filter: _Filters


class _HeaderValue(TypedDict):
    key: str
    value: str


class _HeaderValueOption(TypedDict):
    header: _HeaderValue


class _BodyFormat(TypedDict, total=False):
    json_format: Required[JSONObject]
    content_type: str


class _MapperOverrides(TypedDict, total=False):
    """What a local reply mapper sets besides its filter and body (between them, in the rendered order)."""

    status_code: int
    headers_to_add: list[_HeaderValueOption]


class _LocalReplyMapper(_MapperOverrides, total=False):
    filter: Required[_AccessLogFilter]
    body_format_override: Required[_BodyFormat]


class _Extension(TypedDict):
    name: str
    typed_config: dict[str, str]  # {"@type": ...}


# ("@type" is no Python name.)
_Transcoder = TypedDict("_Transcoder", {
    "@type": str, "proto_descriptor": str, "services": list[str], "convert_grpc_status": bool,
    "query_param_unescape_plus": bool, "print_options": dict[str, bool], "request_validation_options": dict[str, bool],
    "ignore_unknown_query_parameters": NotRequired[bool],
})


class _RouteMatch(TypedDict, total=False):
    path: str
    prefix: str
    safe_regex: _Regex
    headers: list[_HeaderMatcher]


class _RetryPolicy(TypedDict):
    retry_on: str
    num_retries: int
    retry_host_predicate: list[_Extension]


class _RouteAction(TypedDict):
    cluster: str
    timeout: str
    idle_timeout: str
    retry_policy: _RetryPolicy


class _LuaMetadata(TypedDict):
    free_form_keys: dict[str, bool]
    json_body_paths: dict[str, bool]


class _Metadata(TypedDict):
    filter_metadata: dict[str, _LuaMetadata]  # by filter: envoy.filters.http.lua's


class _PerFilter(TypedDict, total=False):
    typed_per_filter_config: dict[str, _Transcoder]


class _Route(_PerFilter, total=False):
    match: Required[_RouteMatch]
    route: Required[_RouteAction]
    metadata: _Metadata


HTTP_BODY = ".google.api.HttpBody"
HTTP_BODY_FILE = "google/api/httpbody.proto"


def edge_descriptor(paths: list[pathlib.Path]) -> bytes:
    """The FileDescriptorSet the transcoder gets: every file of the given sets
    once, with every server-streaming method answering `google.api.HttpBody`
    (the kernel renders streams as server-sent events itself, with `id:` and
    `event:` lines the transcoder cannot write; transport/sse.py)."""
    merged = descriptor_pb2.FileDescriptorSet()
    seen: set[str] = set()
    for path in paths:
        for file in descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file:
            if file.name not in seen:
                seen.add(file.name)
                merged.file.append(file)
    for file in merged.file:
        streaming = [m for service in file.service for m in service.method if m.server_streaming]
        for method in streaming:
            method.output_type = HTTP_BODY
        if streaming and HTTP_BODY_FILE not in file.dependency:
            file.dependency.append(HTTP_BODY_FILE)
    return _dependencies_first(merged).SerializeToString()


def _dependencies_first(files: descriptor_pb2.FileDescriptorSet) -> descriptor_pb2.FileDescriptorSet:
    """The files ordered so each comes after what it imports (pools build in order)."""
    by_name = {f.name: f for f in files.file}
    ordered = descriptor_pb2.FileDescriptorSet()
    done: set[str] = set()

    def add(name: str) -> None:
        if name in done or name not in by_name:
            return
        done.add(name)
        for dependency in by_name[name].dependency:
            add(dependency)
        ordered.file.append(by_name[name])

    for name in by_name:
        add(name)
    return ordered


def shaped_rpcs(services: list[ServiceDescriptor]) -> dict[str, int]:
    """The gRPC paths of the RPCs whose errors have a shape of their own."""
    plain = (options_pb2.ERROR_SHAPE_UNSPECIFIED, options_pb2.ERROR_SHAPE_ENVELOPE)
    return {f"/{service.full_name}/{method.name}": shape for service in services for method in service.methods
            if (shape := method.GetOptions().Extensions[options_pb2.policy].error_shape) not in plain}


def _local_reply_mappers(shaped_paths: dict[str, int] | None = None, allowed: list[tuple[str, list[str]]] | None = None,
                         indent: str = "            ") -> str:
    """Envoy's own replies as the envelope; in a declared error shape under a
    path prefix that declares one (`/v1/auth/scim/v2/`: no such path, a method
    the path does not take) or for an RPC that does (its gRPC path, as the
    transcoder rewrote it before failing to bind the request). Those mappers
    come first: the first match wins. Before all, the transcoder's 404 for a
    path some binding takes with other methods (`allowed`: method_paths) is
    405 with `Allow`, in the shape of the prefix the path is under."""
    by_shape: dict[int, list[_AccessLogFilter]] = {}
    for path, shape in sorted((shaped_paths or {}).items()):
        # A prefix, or one path with any query (the edge's answer to a query it refuses is under it too).
        by_shape.setdefault(shape, []).append(
            {"header_filter": {"header": {"name": ":path", "string_match": {"prefix": path}}}} if path.endswith("/")
            else _header_regex(":path", f"^{re.escape(path)}(\\?.*)?$"))
    refused, answered, code, message = UPGRADE_REFUSED
    upgrade: _AccessLogFilter = {"header_filter": {"header": {"name": "upgrade", "present_match": True}}}
    # (filter, status answered, whether it replaces Envoy's, code, message),
    # in match order. A fallback's SCIM body names its threshold.
    replies: list[tuple[_AccessLogFilter, int, bool, str, str]] = [
        (_and([_status_is("EQ", refused), upgrade]), answered, True, code, message),
        *((_status_is("EQ", s), s, False, c, m) for s, (c, m) in LOCAL_REPLIES.items()),
        *((_status_is("GE", s), s, False, c, m) for s, c, m in LOCAL_REPLY_FALLBACKS),
    ]
    prefixes = {p: s for p, s in (shaped_paths or {}).items() if p.endswith("/")}
    not_allowed = CATALOGUE["method_not_allowed"]
    mappers: list[_LocalReplyMapper] = []
    for template, methods in allowed or []:
        shape = next((s for p, s in prefixes.items() if template.startswith(p)), options_pb2.ERROR_SHAPE_UNSPECIFIED)
        by_path = _and([_status_is("EQ", 404), _header_regex(":path", f"^{_template_regex(template)}(\\?.*)?$"),
                        _header_regex(":method", f"^({'|'.join(methods)})$", invert=True)])
        mappers.append(_mapper(by_path, not_allowed.http_status, True, not_allowed.code,
                               f"{not_allowed.message} It takes {', '.join(methods)}.", shape,
                               {"allow": ", ".join(methods)}))
    for shape, paths in [*sorted(by_shape.items()), (options_pb2.ERROR_SHAPE_UNSPECIFIED, [])]:
        where: list[_AccessLogFilter] = [paths[0] if len(paths) == 1 else {"or_filter": {"filters": paths}}] \
            if paths else []
        mappers += [_mapper(_and([*where, by_status]), status, replaced, code, message, shape, RETRY_AFTER.get(status))
                    for by_status, status, replaced, code, message in replies]
    return "\n".join(f"{indent}- {json.dumps(mapper)}" for mapper in mappers)


def _mapper(where: _AccessLogFilter, status: int, replaced: bool, code: str, message: str, shape: int,
            headers: dict[str, str] | None = None) -> _LocalReplyMapper:
    """One local reply mapper: the catalogue code and message in the shape
    (with `status` instead of Envoy's when `replaced`)."""
    envelope = json.dumps({"error": {"code": code, "message": message, "details": {}}})
    body, content_type = shaped_body(envelope, status, shape)
    overrides: _MapperOverrides = {}
    if replaced:
        overrides["status_code"] = status
    if headers:
        overrides["headers_to_add"] = [{"header": {"key": k, "value": v}} for k, v in headers.items()]
    body_format: _BodyFormat = {"json_format": json.loads(body)}
    if content_type:
        body_format["content_type"] = content_type
    return {"filter": where, **overrides, "body_format_override": body_format}


def _status_is(op: str, status: int) -> _AccessLogFilter:
    return {"status_code_filter": {"comparison": {"op": op, "value": {
        "default_value": status, "runtime_key": f"persona.local_reply.{op.lower()}{status}"}}}}


def _and(filters: list[_AccessLogFilter]) -> _AccessLogFilter:
    return filters[0] if len(filters) == 1 else {"and_filter": {"filters": filters}}


def _header_regex(name: str, regex: str, invert: bool = False) -> _AccessLogFilter:
    header: _HeaderMatcher = {"name": name, "string_match": {"safe_regex": {"regex": regex}}}
    if invert:
        header["invert_match"] = True
    return {"header_filter": {"header": header}}


def method_paths(services: list[ServiceDescriptor]) -> list[tuple[str, list[str]]]:
    """Each HTTP path template and the methods its bindings take
    (HEAD with GET), the most literal templates first (`/v1/personas/import`
    before `/v1/personas/{id}`, whose `{id}` would also match it)."""
    order = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    methods: dict[str, set[str]] = {}
    for service in services:
        for method in service.methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            for binding in (rule, *rule.additional_bindings):
                kind = binding.WhichOneof("pattern")
                if kind is not None and _template(binding):
                    verb = binding.custom.kind if kind == "custom" else kind.upper()
                    methods.setdefault(_template(binding), set()).update({verb, "HEAD"} if verb == "GET" else {verb})
    literal = sorted(methods, key=lambda t: len(re.sub(r"\{[^}]*\}", "", t)), reverse=True)
    return [(t, sorted(methods[t], key=lambda m: order.index(m) if m in order else len(order))) for t in literal]


def _endpoints(grpc_ports: list[int], health_ports: list[int], indent: str = "        ") -> str:
    return "\n".join(
        f"{indent}- endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}, "
        f"health_check_config: {{port_value: {health}}}}}"
        for port, health in zip(grpc_ports, health_ports)
    )


UNARY_CLUSTER = "grpc_backend"
STREAM_CLUSTER = "grpc_stream_backend"
TRANSCODER = "type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder"
_PREVIOUS_HOSTS: list[_Extension] = [{
    "name": "envoy.retry_host_predicates.previous_hosts",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"},
}]


def _transcoder(descriptor: str, services: list[str], lenient_query: bool = False) -> _Transcoder:
    """The gRPC-JSON transcoder: strict about query parameters except on
    lenient prefixes, where unknown ones are ignored (SCIM clients add their own)."""
    transcoder: _Transcoder = {
        "@type": TRANSCODER,
        "proto_descriptor": descriptor,
        "services": services,
        "convert_grpc_status": False,
        # Query strings as browsers and HTTP clients encode them: `+` is a space
        # (SCIM filters: `filter=userName+eq+"ada"`).
        "query_param_unescape_plus": True,
        "print_options": {
            "always_print_primitive_fields": True,
            "preserve_proto_field_names": False,
            "stream_sse_style_delimited": True,
        },
        "request_validation_options": {
            "reject_unknown_method": True,
            "reject_unknown_query_parameters": not lenient_query,
            "reject_binding_body_field_collisions": True,
        },
    }
    if lenient_query:
        transcoder["ignore_unknown_query_parameters"] = True
    return transcoder


@dataclass(frozen=True)
class StreamRoute:
    """A server-streaming RPC: its gRPC path and its HTTP path templates."""

    grpc_path: str  # "/persona.v1.ChatService/StreamChatMessage"
    http_templates: tuple[str, ...]  # ("/v1/chat/sessions/{id}/messages:stream",)


def stream_routes(services: list[ServiceDescriptor]) -> list[StreamRoute]:
    found = []
    for service in services:
        for method in service.methods:
            if method.server_streaming:
                rule = method.GetOptions().Extensions[annotations_pb2.http]
                templates = [_template(r) for r in (rule, *rule.additional_bindings)]
                found.append(StreamRoute(f"/{service.full_name}/{method.name}", tuple(t for t in templates if t)))
    return found


def _template(rule: http_pb2.HttpRule) -> str:
    pattern = rule.WhichOneof("pattern")
    if pattern is None:
        return ""
    path: str = rule.custom.path if pattern == "custom" else getattr(rule, pattern)
    return path


def json_body_paths(services: list[ServiceDescriptor]) -> dict[str, bool]:
    """Lua patterns (`^POST /v1/personas$`) of the bindings whose body the
    transcoder reads as JSON, where the edge requires `application/json`.
    Bindings without a body ignore one; a body bound to `google.api.HttpBody`
    reaches the RPC raw with its media type, which it checks itself (SCIM's
    `application/scim+json`, a payment processor's signed webhook)."""
    found = {}
    for service in services:
        for method in service.methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            for binding in (rule, *rule.additional_bindings):
                field = method.input_type.fields_by_name.get(binding.body)
                body_type = method.input_type if binding.body == "*" else field.message_type if field else None
                raw = body_type is not None and body_type.full_name == HTTP_BODY.lstrip(".")
                if binding.body and not raw and _template(binding):
                    kind = binding.WhichOneof("pattern")
                    verb = binding.custom.kind if kind == "custom" else str(kind).upper()
                    found[f"^{verb} {_lua_pattern(_template(binding))}$"] = True
    return found


# How a field's JSON reads, by proto type (envelope.lua words each kind for a
# person: "an integer", "an object"). Well-known messages by their JSON form;
# any other message is an object.
_KINDS = {
    FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BYTES: "bytes", FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_DOUBLE: "number", FieldDescriptor.TYPE_FLOAT: "number", FieldDescriptor.TYPE_ENUM: "enum",
    **dict.fromkeys((FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32), "int32"),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32), "uint32"),
    **dict.fromkeys((FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64), "int64"),
    **dict.fromkeys((FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64), "uint64"),
}
_WELL_KNOWN_KINDS = {
    "google.protobuf.Value": "value", "google.protobuf.ListValue": "array",
    "google.protobuf.Timestamp": "timestamp", "google.protobuf.Duration": "duration",
    "google.protobuf.FieldMask": "fieldmask", "google.protobuf.StringValue": "string",
    "google.protobuf.BytesValue": "bytes", "google.protobuf.BoolValue": "bool", "google.protobuf.Int32Value": "int32",
    "google.protobuf.UInt32Value": "uint32", "google.protobuf.Int64Value": "int64",
    "google.protobuf.UInt64Value": "uint64", "google.protobuf.DoubleValue": "number",
    "google.protobuf.FloatValue": "number",
}


def _field_spec(field: FieldDescriptor, walked: Callable[[Descriptor], None]) -> str:
    """`<JSON name> <kind>[[]][ <message>]`: `scopes string[]`, `soul object persona.v1.Soul`."""
    message = field.message_type
    nested = ""
    if message is None:
        kind = _KINDS.get(field.type, "value")
    elif message.GetOptions().map_entry:
        return f"{field.json_name} map"
    elif message.full_name.startswith("google."):
        kind = _WELL_KNOWN_KINDS.get(message.full_name, "object")
    else:
        kind, nested = "object", f" {message.full_name}"
        walked(message)
    return f"{field.json_name} {kind}{'[]' if field.is_repeated else ''}{nested}"


def json_fields(services: list[ServiceDescriptor]) -> dict[str, object]:
    """What envelope.lua needs to say a value of the wrong JSON type in the
    contract's words (the transcoder names proto fields and proto types):
    `bindings`, each HTTP binding's Lua pattern (`^POST /v1/personas$`, the
    most literal first) with its request message and its `body` selector
    (`*`, a field, or "" when every field is a query or path parameter), and
    `messages`, each request message's fields (and theirs, recursively) by
    proto name (_field_spec). Appended to the Lua as a table (render)."""
    bindings: list[tuple[int, int, list[str]]] = []
    messages: dict[str, dict[str, str]] = {}

    def walk(message: Descriptor) -> None:
        if message.full_name not in messages:
            messages[message.full_name] = {}  # (first: a message may hold itself)
            messages[message.full_name] = {f.name: _field_spec(f, walk) for f in message.fields}

    for service in services:
        for method in service.methods:
            walk(method.input_type)
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            for binding in (rule, *rule.additional_bindings):
                kind = binding.WhichOneof("pattern")
                template = _template(binding)
                if kind is None or not template:
                    continue
                verb = binding.custom.kind if kind == "custom" else kind.upper()
                literal = len(re.sub(r"\{[^}]*\}", "", template))
                bindings.append((template.count("{"), -literal,
                                 [f"^{verb} {_lua_pattern(template)}$", method.input_type.full_name, binding.body]))
    return {"bindings": [b for _, _, b in sorted(bindings, key=lambda b: b[:2])], "messages": messages}


def lua_source(services: list[ServiceDescriptor]) -> str:
    """envelope.lua with the services' json_fields as its global `JSON_FIELDS`
    (appended: the script's line numbers stay the file's)."""
    return (EDGE / "envelope.lua").read_text() + "\nJSON_FIELDS = " + _lua_value(json_fields(services)) + "\n"


def _lua_value(value: object) -> str:
    """A Lua literal of strings, lists and string-keyed dicts (proto names and
    Lua patterns: printable ASCII)."""
    if isinstance(value, str):
        if not value.isascii() or not value.isprintable():
            raise ValueError(f"not printable ASCII: {value!r}")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "{" + ", ".join(_lua_value(v) for v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{_lua_value(k)}] = {_lua_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def _lua_pattern(template: str) -> str:
    """`/v1/personas/{id}:edit` -> `/v1/personas/[^/]+:edit` as a Lua pattern
    (`{x=**}` spans segments)."""
    parts = re.split(r"(\{[^}]*\})", template)
    return "".join((".+" if "**" in p else "[^/]+") if p.startswith("{") else re.sub(r"([\^$()%.\[\]*+\-?])", r"%\1", p)
                   for p in parts)


def _template_regex(template: str) -> str:
    """`/v1/chat/sessions/{id}/messages:stream` -> a regex of the path (Envoy
    matches `safe_regex` on the path without its query string; `{x=**}` spans segments)."""
    parts = re.split(r"(\{[^}]*\})", template)
    return "".join((".+" if "**" in p else "[^/]+") if p.startswith("{") else re.escape(p) for p in parts)


def _route(match: _RouteMatch, cluster: str, retry_on: str, extra: _PerFilter | None = None) -> _Route:
    route: _Route = {
        "match": match,
        "route": {
            "cluster": cluster, "timeout": "0s", "idle_timeout": "300s",
            "retry_policy": {"retry_on": retry_on, "num_retries": 2, "retry_host_predicate": _PREVIOUS_HOSTS},
        },
    }
    # Copied by its key, not `**extra`: a _PerFilter could carry any other key (a subtype's), `metadata` of another
    # type included (mypy's extra_checks).
    if extra is not None and "typed_per_filter_config" in extra:
        route["typed_per_filter_config"] = extra["typed_per_filter_config"]
    return route


# Retried on another backend only when the request never reached one.
_UNSENT = "connect-failure,refused-stream"


def _routes(descriptor: str, services: list[str], lenient_prefixes: list[str], streams: list[StreamRoute],
            indent: str = "              ") -> str:
    # Server streams go to the stream ports (native gRPC by path, JSON by the
    # binding the Lua filter rewrote `?stream=true` / `"stream": true` to).
    routes = [_route({"path": s.grpc_path}, STREAM_CLUSTER, _UNSENT) for s in streams]
    routes += [_route({"safe_regex": {"regex": _template_regex(t)}}, STREAM_CLUSTER, _UNSENT)
               for s in streams for t in s.http_templates]
    for prefix in [*sorted(lenient_prefixes, key=len, reverse=True), "/"]:
        per_filter: _PerFilter = {} if prefix == "/" else {"typed_per_filter_config": {
            "envoy.filters.http.grpc_json_transcoder": _transcoder(descriptor, services, lenient_query=True)}}
        safe: _RouteMatch = {"prefix": prefix, "headers": [{"name": "x-persona-safe-method", "present_match": True}]}
        routes.append(_route(safe, UNARY_CLUSTER, _UNSENT + ",reset", per_filter))
        routes.append(_route({"prefix": prefix}, UNARY_CLUSTER, _UNSENT, per_filter))
    # As route metadata the Lua reads: the body fields whose free-form values its strict-body scan does
    # not walk (transport/body_keys.py), and the bindings whose body is JSON, where it requires that media type.
    free_form = dict.fromkeys(free_form_keys(find_services(services)), True)
    json_bodies = json_body_paths(find_services(services))
    for route in routes:
        route["metadata"] = {"filter_metadata": {"envoy.filters.http.lua": {"free_form_keys": free_form,
                                                                            "json_body_paths": json_bodies}}}
    return "\n".join(f"{indent}- {json.dumps(route)}" for route in routes)


def _clusters(grpc_ports: list[int], health_ports: list[int], stream_ports: list[int],
              stream_servers: str = "") -> str:
    """Both clusters health-check each process on its stream port (`health_ports`: the unary ports'
    processes'): a probe there never queues behind the unary calls of a busy process (whose unary
    threads may all be working), while a dead process fails both. The stream ports may be other
    processes' than the unary ones (stream servers, PERSONA_STREAM_SERVER_PROCESSES), or, with
    `stream_servers` (`host:port`, PERSONA_EDGE_STREAM_SERVERS), every address a DNS name resolves to
    (the stream-server pods of a headless Service), each health-checked on that port."""
    template = Template((EDGE / "cluster.yaml.in").read_text().split("\n", 1)[1])
    static = "type: STATIC"
    unary = template.substitute(name=UNARY_CLUSTER, discovery=static, endpoints=_endpoints(grpc_ports, health_ports),
                                panic_threshold=0 if len(grpc_ports) > 1 else 100)
    if not stream_servers:
        return unary + template.substitute(name=STREAM_CLUSTER, discovery=static,
                                           endpoints=_endpoints(stream_ports, stream_ports),
                                           panic_threshold=0 if len(stream_ports) > 1 else 100)
    host, _, port = stream_servers.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"PERSONA_EDGE_STREAM_SERVERS must be host:port, not {stream_servers!r}")
    # Each address the name resolves to is an endpoint; a pod that leaves (drains, dies) fails its health check
    # at once, before the name stops resolving to it. Never routed to while unhealthy: the others serve.
    discovery = "type: STRICT_DNS\n    dns_lookup_family: V4_PREFERRED"
    endpoint = (f"        - endpoint: {{address: {{socket_address: {{address: {json.dumps(host.strip('[]'))}, "
                f"port_value: {int(port)}}}}}}}")
    return unary + template.substitute(name=STREAM_CLUSTER, discovery=discovery, endpoints=endpoint, panic_threshold=0)


# One access-log line per request, as JSON (default) or text: the client's
# method and path, status, the error's catalogue code, Envoy's flags, bytes, duration, request id,
# W3C trace id (from `traceparent`), client address, gRPC status, backend.
ACCESS_LOG_FIELDS = {
    "time": "%START_TIME%",
    "method": "%DYNAMIC_METADATA(persona:method)%",
    "path": "%DYNAMIC_METADATA(persona:path)%",
    "protocol": "%PROTOCOL%",
    "status": "%RESPONSE_CODE%",
    "code": "%DYNAMIC_METADATA(persona:code)%",
    "rpc": "%PATH(NQ:PATH)%",  # the gRPC path; an untranscoded request's path, without its query
    "org": "%DYNAMIC_METADATA(persona:org)%",
    "workspace": "%DYNAMIC_METADATA(persona:workspace)%",
    "principal": "%DYNAMIC_METADATA(persona:principal)%",
    "flags": "%RESPONSE_FLAGS%",
    "bytes_sent": "%BYTES_SENT%",
    "duration_ms": "%DURATION%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "trace_id": "%DYNAMIC_METADATA(persona:trace_id)%",
    "client": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
    "grpc_status": "%GRPC_STATUS_NUMBER%",
    "upstream": "%UPSTREAM_HOST%",
}


def _access_log_format(style: str, indent: str = "                ") -> str:
    if style == "text":
        line = ('[%START_TIME%] "%DYNAMIC_METADATA(persona:method)% %DYNAMIC_METADATA(persona:path)% %PROTOCOL%" '
                "%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_SENT% %DURATION%ms code=%DYNAMIC_METADATA(persona:code)% "
                "request_id=%REQ(X-REQUEST-ID)% "
                "trace_id=%DYNAMIC_METADATA(persona:trace_id)% client=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%\n")
        return f"{indent}text_format_source:\n{indent}  inline_string: {json.dumps(line)}"
    return f"{indent}json_format: {json.dumps(ACCESS_LOG_FIELDS)}"


# Where Envoy reads the edge secret (its environment, set by whoever starts
# it): the rendered configuration only names the variable.
EDGE_SECRET_ENV = "PERSONA_EDGE_SECRET"


def render(*, services: list[str], http_port: int, grpc_ports: list[int], admin_socket: pathlib.Path,
           access_log: str, listen_address: str, request_timeout: int = 30, max_connections: int = 10_000,
           access_log_style: str = "json",
           descriptor: pathlib.Path = DESCRIPTOR, lenient_query_prefixes: list[str] | None = None,
           stream_ports: list[int] | None = None, streams: list[StreamRoute] | None = None,
           error_shape_paths: dict[str, int] | None = None, health_ports: list[int] | None = None,
           stream_servers: str = "") -> str:
    """Envoy's configuration: unary calls to `grpc_ports` (health-checked on `health_ports`, by default
    the stream ports of the same processes), server streams to `stream_ports` (by default the unary ports),
    or to the stream servers at `stream_servers` (`host:port`, resolved by DNS) when given."""
    template = Template((EDGE / "envoy.yaml.in").read_text())
    return template.substitute(
        http_port=http_port,
        admin_socket=json.dumps(str(admin_socket)),
        listen_address=listen_address,
        edge_secret_env=EDGE_SECRET_ENV,
        request_timeout=request_timeout,
        request_headers_timeout=min(10, request_timeout),
        max_connections=max_connections,
        max_request_headers_kb=EDGE_HEADERS_KB,
        access_log=access_log,
        access_log_format=_access_log_format(access_log_style),
        lua_source=json.dumps(lua_source(find_services(services))),
        transcoder=json.dumps(_transcoder(str(descriptor), services)),
        routes=_routes(str(descriptor), services, lenient_query_prefixes or [], streams or []),
        local_reply_mappers=_local_reply_mappers(error_shape_paths, method_paths(find_services(services))),
        clusters=_clusters(grpc_ports, health_ports or stream_ports or grpc_ports, stream_ports or grpc_ports,
                           stream_servers),
    )
