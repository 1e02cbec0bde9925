"""The OpenAI-compatible endpoints' error shape (options.ERROR_SHAPE_OPENAI):
the envelope plus OpenAI's `type` and `param`, which OpenAI's clients read
into their exceptions (`err.type`, `err.param`), with OpenAI's statuses (400
where the envelope says 422: `BadRequestError` in OpenAI's clients) and its
`model_not_found` for a model that does not exist."""

from __future__ import annotations

from persona_service.chat.json_support import JSONObject, as_object, first_object
from persona_service.kernel.api import ApiError, compact_json, envelope

# By catalogue code where OpenAI has a type of its own, else by HTTP status.
_TYPES_BY_CODE = {"quota_exceeded": "insufficient_quota", "not_found": "not_found_error"}
_TYPES_BY_STATUS = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                    429: "rate_limit_error"}
# Catalogue status -> OpenAI's (kernel.module.Module.error_shape_statuses): OpenAI answers a request it
# refuses (a field's value, a refused content) 400, never 422.
OPENAI_STATUSES = {422: 400}
# Codes of OpenAI's own that this shape answers beside the catalogue's (the OpenAPI document lists them).
OPENAI_CODES = ("model_not_found",)


def openai_error_body(error: JSONObject, status: int) -> tuple[str, None]:
    return compact_json(_shaped(error, status)), None


def openai_envelope(err: ApiError) -> JSONObject:
    """The in-band `error` chunk of a stream already started, in the same shape."""
    return _shaped(as_object(envelope(err)["error"]) or {}, err.spec.http_status)


def _shaped(error: JSONObject, status: int) -> JSONObject:
    details = as_object(error.get("details")) or {}  # the envelope's: always an object
    code = str(error["code"])  # the envelope's: always a catalogue code, a string
    if code == "not_found" and isinstance(details.get("model"), str):
        # OpenAI's answer for a model that does not exist (or is another organization's), code and type alike.
        return {"error": {**error, "code": OPENAI_CODES[0], "type": "invalid_request_error", "param": None,
                          "message": f"The model `{details['model']}` does not exist or you do not have access "
                                     "to it."}}
    return {"error": {**error, "type": openai_type(code, status), "param": _param(details)}}


def openai_type(code: str, status: int) -> str:
    if code in _TYPES_BY_CODE:
        return _TYPES_BY_CODE[code]
    if status >= 500:
        return "server_error"
    return _TYPES_BY_STATUS.get(status, "invalid_request_error")


def _param(details: JSONObject) -> str | None:
    """The first invalid field, as the request named it."""
    first = first_object(details.get("validationErrors")) or {}
    path = first.get("path") or details.get("field") or details.get("conflictField")
    return path if isinstance(path, str) and path else None
