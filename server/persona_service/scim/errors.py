"""SCIM's errors (RFC 7644 §3.12) as catalogue errors: the scimType rides in
the details, where the edge's SCIM error shape reads it."""

from __future__ import annotations

from typing import Any

from persona_service.kernel.errors import ApiError


def scim_error(code: str, scim_type: str | None, message: str, **details: Any) -> ApiError:
    return ApiError(message, {**({"scimType": scim_type} if scim_type else {}), **details}, code=code)


def invalid_value(message: str, violations: list[dict[str, Any]] | None = None) -> ApiError:
    return scim_error("validation_failed", "invalidValue", message, **({"violations": violations} if violations else {}))


def bad_request(scim_type: str, message: str) -> ApiError:
    return scim_error("bad_request", scim_type, message)
