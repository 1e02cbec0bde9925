"""Typed exceptions: one class per code of the service's error catalogue.

Every error body is read into the same fields, whatever its shape: the
envelope `{"error": {"code", "message", "details"}}`, the portrait edit's flat
`{"error": "<code>", "message", ...}` and SCIM's `{"schemas", "status",
"detail", ...}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx


class PersonaError(Exception):
    """Base of every error the SDK raises.

    API errors carry the HTTP `status`, the catalogue `code`, the `message`,
    the code-specific `details`, the `request_id` (response header
    `x-request-id`, quote it to support) and the response `headers`.
    """

    #: The catalogue code a subclass stands for (the base: any).
    default_code: str = ""
    #: The HTTP status of that code.
    default_status: int | None = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        details: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.default_status
        self.code = code or self.default_code
        self.details: dict[str, Any] = dict(details or {})
        self.request_id = request_id
        self.headers = httpx.Headers(headers or {})
        self.response = response

    def __str__(self) -> str:
        parts = [f"{self.status} {self.code}" if self.status else self.code, self.message]
        if self.request_id:
            parts.append(f"(request id {self.request_id})")
        return " ".join(p for p in parts if p)


class APIConnectionError(PersonaError):
    """The service could not be reached, or the connection broke (no HTTP status)."""

    default_code = "connection_error"


class APITimeoutError(APIConnectionError):
    """The request timed out on the client side."""

    default_code = "timeout"


class StreamLostError(PersonaError):
    """A stream's run ended `lost`: no server process could finish it (none did in 5 attempts, or a reply
    taken over could not go on from the text already sent). Nothing of it was committed: send it again."""

    default_code = "stream_lost"


class WebhookVerificationError(PersonaError):
    """A webhook delivery's signature, timestamp or body did not verify."""

    default_code = "webhook_verification_failed"


# --- one class per catalogue code (proto/persona/v1/errors.proto) ----------------------


class BadRequestError(PersonaError):
    default_code, default_status = "bad_request", 400


class UnauthorizedError(PersonaError):
    default_code, default_status = "unauthorized", 401


class ForbiddenError(PersonaError):
    default_code, default_status = "forbidden", 403


class NotFoundError(PersonaError):
    default_code, default_status = "not_found", 404


class MethodNotAllowedError(PersonaError):
    default_code, default_status = "method_not_allowed", 405


class RequestTimeoutError(PersonaError):
    default_code, default_status = "request_timeout", 408


class IdempotencyConflictError(PersonaError):
    default_code, default_status = "idempotency_conflict", 409


class StateConflictError(PersonaError):
    default_code, default_status = "state_conflict", 409


class DriftBlockedError(PersonaError):
    default_code, default_status = "drift_blocked", 409


class AuditBlockedError(PersonaError):
    default_code, default_status = "audit_blocked", 409


class AssetExpiredError(PersonaError):
    default_code, default_status = "asset_expired", 410


class PreconditionFailedError(PersonaError):
    default_code, default_status = "precondition_failed", 412


class PayloadTooLargeError(PersonaError):
    default_code, default_status = "payload_too_large", 413


class UnsupportedMediaTypeError(PersonaError):
    default_code, default_status = "unsupported_media_type", 415


class ValidationFailedError(PersonaError):
    default_code, default_status = "validation_failed", 422


class UpgradeRequiredError(PersonaError):
    default_code, default_status = "upgrade_required", 426


class ModerationBlockedError(PersonaError):
    default_code, default_status = "moderation_blocked", 422


class RateLimitedError(PersonaError):
    default_code, default_status = "rate_limited", 429


class QuotaExceededError(PersonaError):
    default_code, default_status = "quota_exceeded", 429


class HeadersTooLargeError(PersonaError):
    default_code, default_status = "headers_too_large", 431


class InternalServerError(PersonaError):
    default_code, default_status = "internal_error", 500


class NotImplementedByServerError(PersonaError):
    default_code, default_status = "not_implemented", 501


class ProviderError(PersonaError):
    default_code, default_status = "provider_error", 502


class ServiceUnavailableError(PersonaError):
    default_code, default_status = "service_unavailable", 503


class ProviderTimeoutError(PersonaError):
    default_code, default_status = "provider_timeout", 504


CATALOGUE: tuple[type[PersonaError], ...] = (
    BadRequestError, UnauthorizedError, ForbiddenError, NotFoundError, MethodNotAllowedError, RequestTimeoutError,
    IdempotencyConflictError, StateConflictError, DriftBlockedError, AuditBlockedError, AssetExpiredError,
    PreconditionFailedError, PayloadTooLargeError, UnsupportedMediaTypeError, ValidationFailedError,
    UpgradeRequiredError, ModerationBlockedError, RateLimitedError, QuotaExceededError, HeadersTooLargeError, InternalServerError,
    NotImplementedByServerError, ProviderError, ServiceUnavailableError, ProviderTimeoutError,
)
BY_CODE: dict[str, type[PersonaError]] = {cls.default_code: cls for cls in CATALOGUE}
# A body without a known code (a proxy's own page, a newer code) still gets the
# class of its status where the status has one code only.
_BY_STATUS: dict[int, type[PersonaError]] = {}
for _cls in CATALOGUE:
    assert _cls.default_status is not None
    _BY_STATUS[_cls.default_status] = _cls if _cls.default_status not in _BY_STATUS else PersonaError


def error_class(code: str, status: int | None) -> type[PersonaError]:
    """The exception class of a catalogue code (else of the status alone, else the base)."""
    if code in BY_CODE:
        return BY_CODE[code]
    return _BY_STATUS.get(status, PersonaError) if status is not None else PersonaError


def parse_error_body(body: Any) -> tuple[str, str, dict[str, Any]]:
    """(code, message, details) of an error body in any of the service's shapes."""
    if not isinstance(body, dict):
        return "", "", {}
    error = body.get("error")
    if isinstance(error, dict):  # the envelope (SCIM's 422s carry it too)
        details = error.get("details")
        return str(error.get("code", "")), str(error.get("message", "")), dict(details) if isinstance(details, dict) else {}
    if isinstance(error, str):  # the portrait edit's flat shape
        rest = {k: v for k, v in body.items() if k not in ("error", "message")}
        return error, str(body.get("message", "")), rest
    if "schemas" in body and "detail" in body:  # SCIM
        rest = {k: v for k, v in body.items() if k in ("scimType", "status")}
        return "", str(body.get("detail", "")), rest
    return "", "", {}


def error_from_response(response: httpx.Response) -> PersonaError:
    """The typed exception for an error response (status >= 400)."""
    try:
        body = json.loads(response.content) if response.content else None
    except ValueError:
        body = None
    code, message, details = parse_error_body(body)
    cls = error_class(code, response.status_code)
    return cls(
        message or response.reason_phrase or f"HTTP {response.status_code}",
        status=response.status_code,
        code=code or cls.default_code or f"http_{response.status_code}",
        details=details,
        request_id=response.headers.get("x-request-id"),
        headers=response.headers,
        response=response,
    )


def error_from_event(error: Any, response: httpx.Response | None) -> PersonaError:
    """The typed exception for a stream's in-band `error` event (the envelope's `error` object)."""
    code, message, details = parse_error_body({"error": error})
    cls = error_class(code, None)
    return cls(
        message or "The stream failed.",
        code=code or "stream_error",
        details=details,
        request_id=response.headers.get("x-request-id") if response is not None else None,
        headers=response.headers if response is not None else None,
        response=response,
    )
