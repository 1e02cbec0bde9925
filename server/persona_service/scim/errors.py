"""SCIM's errors (RFC 7644 §3.12) as catalogue errors: the scimType rides in
the details, where the edge's SCIM error shape reads it."""

from __future__ import annotations

from persona_service.kernel.api import ApiError, compact_json
from persona_service.scim.json_support import JSONObject

SCIM_ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
SCIM_MEDIA_TYPE = "application/scim+json"


def scim_error(code: str, scim_type: str | None, message: str, **details: object) -> ApiError:
    return ApiError(message, {**({"scimType": scim_type} if scim_type else {}), **details}, code=code)


def invalid_value(message: str, violations: list[JSONObject] | None = None) -> ApiError:
    return scim_error("validation_failed", "invalidValue", message, **({"violations": violations} if violations else {}))


def bad_request(scim_type: str, message: str) -> ApiError:
    return scim_error("bad_request", scim_type, message)


def scim_error_body(error: JSONObject, status: int) -> tuple[str, str]:
    """The SCIM error shape (options.ERROR_SHAPE_SCIM): SCIM's error schema
    with the scimType from the details (a `state_conflict` without one: `uniqueness`)."""
    # SCIM's one 409 is `uniqueness` (RFC 7644 §3.12): also a unique index's refusal (kernel.data.unique).
    found = error["details"]  # the envelope's: always an object
    details: JSONObject = found if isinstance(found, dict) else {}
    scim_type = details.get("scimType") or ("uniqueness" if error["code"] == "state_conflict" else None)
    body: JSONObject = {"schemas": [SCIM_ERROR_SCHEMA], "status": str(status), "detail": error["message"],
                        **({"scimType": scim_type} if isinstance(scim_type, str) else {})}
    if error["code"] == "validation_failed":
        # The spec answers validation errors in the envelope, SCIM clients
        # read SCIM's schema: both are there (only here; strict SCIM
        # clients refuse members the schema does not name).
        body["error"] = error
    return compact_json(body), SCIM_MEDIA_TYPE
