"""The OpenAI-compatible endpoints' error shape (options.ERROR_SHAPE_OPENAI):
the envelope plus OpenAI's `type` and `param`, which OpenAI's clients read
into their exceptions (`err.type`, `err.param`), with OpenAI's statuses (400
where the envelope says 422: `BadRequestError` in OpenAI's clients) and its
`model_not_found` for a model that does not exist."""

from __future__ import annotations

from typing import Any

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


def openai_error_body(error: dict[str, Any], status: int) -> tuple[str, None]:
    return compact_json(_shaped(error, status)), None


def openai_envelope(err: ApiError) -> dict[str, Any]:
    """The in-band `error` chunk of a stream already started, in the same shape."""
    return _shaped(envelope(err)["error"], err.spec.http_status)


def _shaped(error: dict[str, Any], status: int) -> dict[str, Any]:
    details = error.get("details") or {}
    if error["code"] == "not_found" and isinstance(details.get("model"), str):
        # OpenAI's answer for a model that does not exist (or is another organization's), code and type alike.
        return {"error": {**error, "code": OPENAI_CODES[0], "type": "invalid_request_error", "param": None,
                          "message": f"The model `{details['model']}` does not exist or you do not have access "
                                     "to it."}}
    return {"error": {**error, "type": openai_type(error["code"], status), "param": _param(details)}}


def openai_type(code: str, status: int) -> str:
    if code in _TYPES_BY_CODE:
        return _TYPES_BY_CODE[code]
    if status >= 500:
        return "server_error"
    return _TYPES_BY_STATUS.get(status, "invalid_request_error")


def _param(details: dict[str, Any]) -> str | None:
    """The first invalid field, as the request named it."""
    violations = details.get("validationErrors") or ()
    first = violations[0] if violations and isinstance(violations[0], dict) else {}
    path = first.get("path") or details.get("field") or details.get("conflictField")
    return path if isinstance(path, str) and path else None
