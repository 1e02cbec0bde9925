"""Validation: a decodable body with no unknown JSON keys, then the request's proto rules."""

from __future__ import annotations

from persona_service.kernel.errors import BadRequest
from persona_service.kernel.transport.body_keys import HEADER as BODY_KEYS
from persona_service.kernel.transport.body_keys import refuse_unknown_fields
from persona_service.kernel.transport.stages.call import Call, Stage
from persona_service.kernel.transport.stages.call import Undecodable as Undecodable
from persona_service.kernel.transport.validation import validate


class KnownFields(Stage):
    """The body decoded, and the JSON keys it was sent with (the edge's copy) all known."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, call: Call) -> object:
        if isinstance(call.request, Undecodable):
            raise _undecodable()
        refuse_unknown_fields(self.path, call.metadata.get(BODY_KEYS))
        return self.then(call)


class Validate(Stage):
    """The request's declared rules (required fields, formats, closed sets)."""

    def __call__(self, call: Call) -> object:
        validate(call.message)
        return self.then(call)


def _undecodable() -> BadRequest:
    return BadRequest(
        "The request could not be decoded: JSON nested deeper than 32 levels, or not a valid message.",
        {"reason": "undecodable"},
    )
