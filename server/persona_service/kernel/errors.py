"""The error catalogue and the domain errors raised from it.

The catalogue is the `persona.v1.ErrorCode` enum: each value carries its
envelope code, HTTP status, gRPC code and default message as proto options,
so the proto is the one source. Domain code raises `ApiError`; the transport
layer translates it in exactly one place (`transport.errors`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from persona.v1 import errors_pb2, options_pb2

if TYPE_CHECKING:
    from persona_service.kernel.principal import Principal


@dataclass(frozen=True)
class ErrorSpec:
    code: str
    http_status: int
    grpc_code: int  # google.rpc.Code value, equal to grpc.StatusCode's first element
    message: str
    retryable: bool


def _load_catalogue() -> dict[str, ErrorSpec]:
    catalogue = {}
    for value in errors_pb2.ErrorCode.DESCRIPTOR.values:
        if not value.GetOptions().HasExtension(options_pb2.error):
            continue
        spec = value.GetOptions().Extensions[options_pb2.error]
        catalogue[spec.code] = ErrorSpec(spec.code, spec.http_status, spec.grpc_code, spec.message, spec.retryable)
    return catalogue


CATALOGUE: dict[str, ErrorSpec] = _load_catalogue()


class ApiError(Exception):
    """An error the API reports to its caller, by catalogue code."""

    code = "internal_error"

    def __init__(self, message: str | None = None, details: dict[str, object] | None = None, *, code: str | None = None):
        if code is not None:
            self.code = code
        self.spec = CATALOGUE[self.code]
        self.message = message or self.spec.message
        self.details = details or {}
        # Response headers that go with the error (e.g. Retry-After).
        self.headers: dict[str, str] = {}
        # Who was acting, when known: recorded in the audit log, never rendered.
        self.principal: Principal | None = None
        # The unit of work's changes are part of this outcome (a failed run's
        # record, a flagged persona): commit them, then answer the error.
        self.persist = False
        super().__init__(self.message)

    def log_cause(self) -> str:
        """The failure's cause in words for the server's log line of the request (never rendered; "" when the
        code says it all). An upstream failure names what the upstream said (kernel.models.ProviderError)."""
        return ""


class Unauthorized(ApiError):
    code = "unauthorized"


class Forbidden(ApiError):
    code = "forbidden"


class NotFound(ApiError):
    code = "not_found"

    def __init__(self, what: str = "resource", details: dict[str, object] | None = None):
        super().__init__(f"The {what} does not exist.", details)


class BadRequest(ApiError):
    code = "bad_request"


class ServiceUnavailable(ApiError):
    code = "service_unavailable"


class StateConflict(ApiError):
    code = "state_conflict"

    def __init__(self, message: str, conflict_field: str, details: dict[str, object] | None = None):
        super().__init__(message, {"conflictField": conflict_field, **(details or {})})


@dataclass(frozen=True)
class Violation:
    """One broken rule: where, which rule, the value seen, what was expected."""

    path: str
    code: str
    value: object  # what the caller sent there (any JSON)
    expected: object  # the rule's bound or shape, rendered as JSON

    def as_dict(self) -> dict[str, object]:
        # Values and paths echo caller input: bounded, so an error body stays small.
        return {"path": bounded(self.path), "code": self.code, "value": bounded(self.value), "expected": self.expected}

    def sentence(self) -> str:
        """The rule in words, for an error's message: "`temperature` must be at most 2."."""
        expected = self.expected if isinstance(self.expected, dict) else {}
        rule = _RULES.get(self.code)
        try:
            said = rule(expected) if rule is not None else f"breaks the rule `{self.code}`"
        except (KeyError, TypeError):
            said = f"breaks the rule `{self.code}`"
        return f"`{bounded(self.path) or 'the request'}` {said}."


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _length(bound: str, count: object, unit: object) -> str:
    if not isinstance(unit, str):  # (what reading it as one raised)
        raise AttributeError(f"'{type(unit).__name__}' object has no attribute 'endswith'")
    unit = unit[:-1] if count == 1 and unit.endswith("s") else unit
    return f"must be {bound} {count} {unit} long" if unit.startswith("character") else f"must have {bound} {count} {unit}"


def _listed(values: object) -> list[object]:
    """What a `for` over `values` goes through (a TypeError where there is nothing to go through)."""
    if not isinstance(values, (list, tuple, dict, str)):
        raise TypeError(f"'{type(values).__name__}' object is not iterable")
    return list(values)


def _article(kind: object) -> str:
    """"an" or "a", by the first letter of the type's name (of the first name, where it names several)."""
    if not isinstance(kind, (str, list, tuple)):
        raise TypeError(f"'{type(kind).__name__}' object is not subscriptable")
    first = kind[0]
    if not isinstance(first, str):
        raise TypeError(f"'in <string>' requires string as left operand, not {type(first).__name__}")
    return "an" if first in "aeiou" else "a"


# What each rule of kernel.transport.validation (and the services' own) says, from its `expected` (a KeyError or
# TypeError where that is not what the rule expects: then the sentence names the rule).
_RULES: dict[str, Callable[[Mapping[str, object]], str]] = {
    "required": lambda e: "is required",
    "min_length": lambda e: _length("at least", e["minLength"], e.get("unit", "characters")),
    "max_length": lambda e: _length("at most", e["maxLength"], e.get("unit", "characters")),
    "minimum": lambda e: f"must be at least {_number(e['minimum'])}",
    "maximum": lambda e: f"must be at most {_number(e['maximum'])}",
    "one_of": lambda e: "must be one of " + ", ".join(f"`{v}`" for v in _listed(e["oneOf"])),
    "format": lambda e: f"must be a valid {e['format']}",
    "unique": lambda e: "must not repeat an earlier item",
    "null_character": lambda e: "must not contain NUL characters (U+0000)",
    "type": lambda e: f"must be {_article(e['type'])} {e['type']}",
}


ECHO_CHARACTERS = 200
ECHO_ITEMS = 20


@overload
def bounded(value: str) -> str: ...
@overload
def bounded(value: list[str]) -> list[str]: ...
@overload
def bounded(value: dict[str, object]) -> dict[str, object]: ...
@overload
def bounded(value: object) -> object: ...
def bounded(value: object) -> object:
    """Caller input as an error may echo it: long strings cut (marked with
    `…`), long lists (tuples: as lists) and objects shortened, recursively: a string, a list or an object
    stays one."""
    if isinstance(value, str):
        return value if len(value) <= ECHO_CHARACTERS else value[:ECHO_CHARACTERS] + "…"
    if isinstance(value, (list, tuple)):
        return [bounded(v) for v in value[:ECHO_ITEMS]]
    if isinstance(value, dict):
        return {bounded(k): bounded(v) for k, v in list(value.items())[:ECHO_ITEMS]}
    return value


class ValidationFailed(ApiError):
    code = "validation_failed"

    def __init__(self, violations: list[Violation], message: str | None = None):
        self.violations = violations
        super().__init__(message or _first_rule(violations), {"validationErrors": [v.as_dict() for v in violations]})


def _first_rule(violations: list[Violation]) -> str | None:
    """The message names the first field and its rule; `details.validationErrors` keeps them all."""
    if not violations:
        return None
    more = len(violations) - 1
    return violations[0].sentence() + (f" ({more} more in `details.validationErrors`.)" if more else "")


class InternalError(ApiError):
    code = "internal_error"


class IdempotencyConflict(ApiError):
    code = "idempotency_conflict"


class StoredError(ApiError):
    """An error recorded with an idempotency key, replayed exactly as first sent."""

    def __init__(self, http_status: int | None, body: str, headers: dict[str, str]) -> None:
        import json

        error = json.loads(body)["error"]
        super().__init__(error["message"], error.get("details") or {}, code=error["code"])
        self.rendered_body = body
        self.headers = dict(headers)
