"""The one place where an ApiError becomes a gRPC status.

Native gRPC callers get the catalogue's gRPC code and, in
`grpc-status-details-bin`, a google.rpc.Status with an ErrorInfo (reason =
the envelope code) and a persona.v1.Error carrying the details. For the JSON
edge, trailing metadata carries `x-http-status` and `x-error-body` (the
rendered body in the RPC's declared error shape, and `x-error-content-type`
when that is not JSON); Envoy's Lua hook turns them into the HTTP response.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import NoReturn

import grpc
from google.protobuf import any_pb2, struct_pb2
from google.rpc import error_details_pb2, status_pb2
from persona.v1 import errors_pb2, options_pb2

from persona_service.kernel.errors import ApiError, bounded
from persona_service.kernel.json_values import JSONObject

DOMAIN = "persona-service"
# Keep the envelope well under Envoy's response-header limit (60 KiB).
MAX_BODY_BYTES = 16_384
# Native gRPC clients refuse metadata over 8 KiB (a soft limit they enforce
# at random from there on): the status details, base64-encoded, stay far below.
MAX_NATIVE_DETAILS_BYTES = 4_096


def envelope(err: ApiError) -> JSONObject:
    return {"error": {"code": err.code, "message": err.message, "details": err.details}}


def render_body(err: ApiError, limit: int = MAX_BODY_BYTES) -> str:
    stored: str | None = getattr(err, "rendered_body", None)
    if stored is not None:
        return stored
    body = compact_json(envelope(err))
    if len(body) <= limit:
        return body
    # Never cut JSON: shorten echoed values, then halve long lists (the
    # violations) until it fits, then drop the details altogether.
    details = {**bounded(err.details), "truncated": True}
    while True:
        body = compact_json({"error": {"code": err.code, "message": err.message, "details": details}})
        longest = max(((k, v) for k, v in details.items() if isinstance(v, list) and len(v) > 1),
                      key=lambda item: len(item[1]), default=None)
        if len(body) <= limit or longest is None:
            break
        key, items = longest
        details[key] = items[: len(items) // 2]
    if len(body) > limit:
        body = compact_json({"error": {"code": err.code, "message": err.message[:500], "details": {"truncated": True}}})
    return body


def compact_json(value: Mapping[str, object]) -> str:
    """JSON as the edge sends it: compact, ASCII."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)


def error_message(err: ApiError, body: str | None = None) -> errors_pb2.Error:
    """The envelope's `error` object as a persona.v1.Error (gRPC status
    details, and the in-band `error` event of server streams)."""
    error = json.loads(body or render_body(err))["error"]
    details = struct_pb2.Struct()
    details.update(error["details"])
    return errors_pb2.Error(code=error["code"], message=error["message"], details=details)


def _status_details(err: ApiError, body: str) -> bytes:
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=err.code, domain=DOMAIN))
    error = any_pb2.Any()
    error.Pack(error_message(err, body))
    status = status_pb2.Status(code=err.spec.grpc_code, message=err.message, details=[info, error])
    return bytes(status.SerializeToString())


# How an error shape other than the envelope renders (Module.error_shapes):
# (the envelope's `error` object, HTTP status) -> (body, its content type,
# None for `application/json`).
ErrorShape = Callable[[JSONObject, int], tuple[str, str | None]]
# By options.ErrorShape value, from the modules' declarations.
ERROR_SHAPES: dict[int, ErrorShape] = {}
# The HTTP statuses a shape answers instead of the catalogue's (Module.error_shape_statuses).
SHAPE_STATUSES: dict[int, dict[int, int]] = {}


def install_error_shapes(shapes: Mapping[int, ErrorShape], statuses: Mapping[int, dict[int, int]] | None = None) -> None:
    for shape, render in shapes.items():
        if ERROR_SHAPES.get(shape, render) is not render:
            raise RuntimeError(f"error shape {shape} is declared twice")
        ERROR_SHAPES[shape] = render
    SHAPE_STATUSES.update(statuses or {})


def shaped_status(status: int, shape: int) -> int:
    """The HTTP status an error of the catalogue's `status` answers in `shape`."""
    return SHAPE_STATUSES.get(shape, {}).get(status, status)


def shaped_body(envelope_body: str, status: int, shape: int) -> tuple[str, str | None]:
    """The rendered envelope in the RPC's declared error shape, with its
    content type when that is not `application/json`."""
    if shape in (options_pb2.ERROR_SHAPE_UNSPECIFIED, options_pb2.ERROR_SHAPE_ENVELOPE):
        return envelope_body, None
    render = ERROR_SHAPES.get(shape)
    if render is None:
        raise ValueError(f"no module renders error shape {shape}")
    return render(json.loads(envelope_body)["error"], status)


def abort(context: grpc.ServicerContext, err: ApiError, headers: list[tuple[str, str]], json_edge: bool,
          shape: int = options_pb2.ERROR_SHAPE_UNSPECIFIED) -> NoReturn:
    """Abort the RPC with the error; never returns. A call through the JSON
    edge gets the envelope carriers (Lua renders them); a native gRPC caller
    gets the status details. Each gets one copy, which keeps the trailers
    under gRPC clients' 8 KiB metadata limit."""
    body = render_body(err, MAX_BODY_BYTES if json_edge else MAX_NATIVE_DETAILS_BYTES)
    extra = {"x-should-retry": "true" if err.spec.retryable else "false", **dict(headers), **err.headers}
    if json_edge:
        status = shaped_status(err.spec.http_status, shape)
        shaped, content_type = shaped_body(body, status, shape)
        carriers: list[tuple[str, str | bytes]] = [("x-http-status", str(status)), ("x-error-body", shaped),
                                                   ("x-error-code", err.code)]
        if content_type is not None:
            carriers.append(("x-error-content-type", content_type))
    else:
        carriers = [("grpc-status-details-bin", _status_details(err, body))]
    trailers = (*carriers, *extra.items())
    context.set_trailing_metadata(trailers)
    context.abort(grpc.StatusCode[_grpc_name(err.spec.grpc_code)], err.message)


def _grpc_name(code: int) -> str:
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return "UNKNOWN"
