"""Validation: a decodable body with no unknown JSON keys, then the request's proto rules."""

from __future__ import annotations

from typing import Any

from persona_service.kernel.errors import BadRequest
from persona_service.kernel.transport.body_keys import HEADER as BODY_KEYS
from persona_service.kernel.transport.body_keys import refuse_unknown_fields
from persona_service.kernel.transport.stages.call import Call, Stage
from persona_service.kernel.transport.validation import validate


class Undecodable:
    """Stands in for a request the deserializer refused (e.g. protobuf's
    nesting limit of 100, which deeply nested JSON objects reach at ~33
    levels), so the pipeline answers 400 instead of gRPC's bare INTERNAL."""


class KnownFields(Stage):
    """The body decoded, and the JSON keys it was sent with (the edge's copy) all known."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, call: Call) -> Any:
        if isinstance(call.request, Undecodable):
            raise _undecodable()
        refuse_unknown_fields(self.path, call.metadata.get(BODY_KEYS))
        return self.then(call)


class Validate(Stage):
    """The request's declared rules (required fields, formats, closed sets)."""

    def __call__(self, call: Call) -> Any:
        validate(call.request)
        return self.then(call)


def _undecodable() -> BadRequest:
    return BadRequest(
        "The request could not be decoded: JSON nested deeper than 32 levels, or not a valid message.",
        {"reason": "undecodable"},
    )
