"""Render the Envoy configuration from edge/envoy.yaml.in (the one source)."""

from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass
from string import Template

from google.api import annotations_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import ServiceDescriptor
from persona.v1 import options_pb2

from persona_service.kernel.errors import CATALOGUE
from persona_service.kernel.transport.errors import shaped_body

ROOT = pathlib.Path(__file__).resolve().parents[3]
EDGE = ROOT / "edge"
DESCRIPTOR = ROOT / "gen" / "descriptor.binpb"

# Envoy's own replies (no route, a body the transcoder cannot parse, the
# backend down): status -> envelope code and a fixed, leak-free message.
LOCAL_REPLIES = {
    # The transcoder's own reason names the field or parameter it could not
    # bind (e.g. "INVALID_ARGUMENT:scopes: ..."); it carries no internals.
    400: ("bad_request", "The request is malformed: %LOCAL_REPLY_BODY%"),
    404: ("not_found", "No such endpoint."),
    405: ("bad_request", "The method is not allowed on this path."),
    408: ("request_timeout", CATALOGUE["request_timeout"].message),
    413: ("payload_too_large", CATALOGUE["payload_too_large"].message + " At most 4 MiB."),
    415: ("unsupported_media_type", CATALOGUE["unsupported_media_type"].message),
    431: ("headers_too_large", CATALOGUE["headers_too_large"].message),
    500: ("internal_error", CATALOGUE["internal_error"].message),
    502: ("service_unavailable", CATALOGUE["service_unavailable"].message),
    503: ("service_unavailable", CATALOGUE["service_unavailable"].message),
    504: ("service_unavailable", CATALOGUE["service_unavailable"].message),
}


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


def _local_reply_mappers(shaped_paths: dict[str, int] | None = None, indent: str = "            ") -> str:
    """Envoy's own replies as the envelope; in a declared error shape under a
    path prefix that declares one (`/v1/auth/scim/v2/`: no such path, a method
    the path does not take) or for an RPC that does (its gRPC path, as the
    transcoder rewrote it before failing to bind the request). Those mappers
    come first: the first match wins."""
    by_shape: dict[int, list[dict]] = {}
    for path, shape in sorted((shaped_paths or {}).items()):
        match = {"prefix": path} if path.endswith("/") else {"exact": path}
        by_shape.setdefault(shape, []).append({"header_filter": {"header": {"name": ":path", "string_match": match}}})
    mappers = []
    for shape, paths in [*sorted(by_shape.items()), (options_pb2.ERROR_SHAPE_UNSPECIFIED, [])]:
        for status, (code, message) in LOCAL_REPLIES.items():
            envelope = json.dumps({"error": {"code": code, "message": message, "details": {}}})
            body, content_type = shaped_body(envelope, status, shape)
            by_status: dict = {"status_code_filter": {"comparison": {"op": "EQ", "value": {
                "default_value": status, "runtime_key": f"persona.local_reply.s{status}"}}}}
            where = paths[0] if len(paths) == 1 else {"or_filter": {"filters": paths}}
            mapper = {
                "filter": {"and_filter": {"filters": [where, by_status]}} if paths else by_status,
                "body_format_override": {"json_format": json.loads(body),
                                         **({"content_type": content_type} if content_type else {})},
            }
            mappers.append(f"{indent}- {json.dumps(mapper)}")
    return "\n".join(mappers)


def _endpoints(grpc_ports: list[int], health_ports: list[int], indent: str = "        ") -> str:
    return "\n".join(
        f"{indent}- endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}, "
        f"health_check_config: {{port_value: {health}}}}}"
        for port, health in zip(grpc_ports, health_ports)
    )


UNARY_CLUSTER = "grpc_backend"
STREAM_CLUSTER = "grpc_stream_backend"
TRANSCODER = "type.googleapis.com/envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder"
_PREVIOUS_HOSTS = [{
    "name": "envoy.retry_host_predicates.previous_hosts",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"},
}]


def _transcoder(descriptor: str, services: list[str], lenient_query: bool = False) -> dict:
    """The gRPC-JSON transcoder: strict about query parameters except on
    lenient prefixes, where unknown ones are ignored (SCIM clients add their own)."""
    return {
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
        **({"ignore_unknown_query_parameters": True} if lenient_query else {}),
    }


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


def _template(rule) -> str:
    pattern = rule.WhichOneof("pattern")
    if pattern is None:
        return ""
    return rule.custom.path if pattern == "custom" else getattr(rule, pattern)


def _template_regex(template: str) -> str:
    """`/v1/chat/sessions/{id}/messages:stream` -> a regex of the path (Envoy
    matches `safe_regex` on the path without its query string)."""
    parts = re.split(r"\{[^}]*\}", template)
    return "[^/]+".join(re.escape(p) for p in parts)


def _route(match: dict, cluster: str, retry_on: str, extra: dict | None = None) -> dict:
    return {
        "match": match,
        "route": {
            "cluster": cluster, "timeout": "0s", "idle_timeout": "300s",
            "retry_policy": {"retry_on": retry_on, "num_retries": 2, "retry_host_predicate": _PREVIOUS_HOSTS},
        },
        **(extra or {}),
    }


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
        per_filter = {} if prefix == "/" else {"typed_per_filter_config": {
            "envoy.filters.http.grpc_json_transcoder": _transcoder(descriptor, services, lenient_query=True)}}
        safe = {"prefix": prefix, "headers": [{"name": "x-persona-safe-method", "present_match": True}]}
        routes.append(_route(safe, UNARY_CLUSTER, _UNSENT + ",reset", per_filter))
        routes.append(_route({"prefix": prefix}, UNARY_CLUSTER, _UNSENT, per_filter))
    return "\n".join(f"{indent}- {json.dumps(route)}" for route in routes)


def _clusters(grpc_ports: list[int], stream_ports: list[int]) -> str:
    """Both clusters health-check each process on its stream port: a probe
    there never queues behind the unary calls of a busy process (whose
    unary threads may all be working), while a dead process fails both."""
    template = Template((EDGE / "cluster.yaml.in").read_text().split("\n", 1)[1])
    return "".join(template.substitute(name=name, endpoints=_endpoints(ports, stream_ports))
                   for name, ports in ((UNARY_CLUSTER, grpc_ports), (STREAM_CLUSTER, stream_ports)))


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
    "rpc": "%REQ(:PATH)%",
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


def render(*, services: list[str], http_port: int, grpc_ports: list[int], admin_port: int, access_log: str,
           listen_address: str, edge_secret: str, request_timeout: int = 30, max_connections: int = 10_000,
           access_log_style: str = "json",
           descriptor: pathlib.Path = DESCRIPTOR, lenient_query_prefixes: list[str] | None = None,
           stream_ports: list[int] | None = None, streams: list[StreamRoute] | None = None,
           error_shape_paths: dict[str, int] | None = None) -> str:
    template = Template((EDGE / "envoy.yaml.in").read_text())
    return template.substitute(
        http_port=http_port,
        admin_port=admin_port,
        listen_address=listen_address,
        edge_secret=json.dumps(edge_secret),
        request_timeout=request_timeout,
        request_headers_timeout=min(10, request_timeout),
        max_connections=max_connections,
        access_log=access_log,
        access_log_format=_access_log_format(access_log_style),
        lua_path=str(EDGE / "envelope.lua"),
        transcoder=json.dumps(_transcoder(str(descriptor), services)),
        routes=_routes(str(descriptor), services, lenient_query_prefixes or [], streams or []),
        local_reply_mappers=_local_reply_mappers(error_shape_paths),
        clusters=_clusters(grpc_ports, stream_ports or grpc_ports),
    )
