"""Render the Envoy configuration from edge/envoy.yaml.in (the one source)."""

from __future__ import annotations

import json
import pathlib
from string import Template

from persona_service.kernel.errors import CATALOGUE

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


def _local_reply_mappers(indent: str = "            ") -> str:
    lines = []
    for status, (code, message) in LOCAL_REPLIES.items():
        body = {"error": {"code": code, "message": message, "details": {}}}
        lines += [
            f"{indent}- filter:",
            f"{indent}    status_code_filter:",
            f"{indent}      comparison:",
            f"{indent}        op: EQ",
            f"{indent}        value: {{default_value: {status}, runtime_key: persona.local_reply.s{status}}}",
            f"{indent}  body_format_override:",
            f"{indent}    json_format: {json.dumps(body)}",
        ]
    return "\n".join(lines)


def _endpoints(grpc_ports: list[int], indent: str = "        ") -> str:
    return "\n".join(
        f"{indent}- endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}"
        for port in grpc_ports
    )


def render(*, services: list[str], http_port: int, grpc_ports: list[int], admin_port: int, access_log: str,
           listen_address: str, edge_secret: str, request_timeout: int = 30, max_connections: int = 10_000) -> str:
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
        lua_path=str(EDGE / "envelope.lua"),
        descriptor=str(DESCRIPTOR),
        services=", ".join(services),
        local_reply_mappers=_local_reply_mappers(),
        backend_endpoints=_endpoints(grpc_ports),
    )
