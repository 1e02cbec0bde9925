"""Declarative request validation from the proto's `(persona.v1.rules)`.

Every rule of every field (nested messages included) is checked in one pass;
all violations are reported together in `details.validationErrors[]`, with
JSON paths (`soul.desire`, `scopes[1]`) because that is what callers wrote.
Rules per message type are read from the descriptor once and cached.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import re
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from persona.v1 import options_pb2

from persona_service.kernel.errors import ValidationFailed, Violation

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


def _is_cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
        return True
    except ValueError:
        return False


FORMATS: dict[str, Callable[[str], bool]] = {"cidr": _is_cidr, "slug": lambda v: bool(_SLUG.match(v))}


_FLOATING = frozenset({FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT})


@functools.cache
def _plan(descriptor: Descriptor) -> tuple[Any, ...]:
    """(field, rules or None, nested, repeated, floating) for fields with rules, nested messages to walk, or a
    double/float (every one is held finite, rules or not)."""
    plan = []
    for field in descriptor.fields:
        opts = field.GetOptions()
        rules = opts.Extensions[options_pb2.rules] if opts.HasExtension(options_pb2.rules) else None
        nested = field.message_type is not None and field.message_type.full_name.startswith("persona.")
        floating = field.cpp_type in _FLOATING
        if rules is not None or nested or floating:
            plan.append((field, rules, nested, field.is_repeated, floating))
    return tuple(plan)


def check_rules(descriptor: Descriptor, seen: set[str] | None = None) -> None:
    """Startup check of a request type's rules (nested messages included): a
    named format or enum that does not exist is an error before any call."""
    seen = set() if seen is None else seen
    if descriptor.full_name in seen:
        return
    seen.add(descriptor.full_name)
    for field, rules, nested, _, _ in _plan(descriptor):
        if rules is not None and rules.format and rules.format not in FORMATS:
            raise RuntimeError(f"{field.full_name}: unknown format {rules.format!r}")
        if rules is not None and rules.one_of_enum:
            try:
                enum_wire_names(rules.one_of_enum)
            except KeyError:
                raise RuntimeError(f"{field.full_name}: unknown enum {rules.one_of_enum!r}") from None
        if nested:
            check_rules(field.message_type, seen)


# A google.protobuf.Value's number (field 2, a double: tag 0x11) that is NaN or an infinity: its eight bytes, little
# endian, end in an all-ones exponent. Anything else matching (another field 2 double, bytes) only costs the walk.
_NON_FINITE = re.compile(rb"\x11.{6}[\xf0-\xff][\x7f\xff]", re.DOTALL)


def validate(message: Message) -> None:
    violations: list[Violation] = []
    _walk(message, "", violations)
    encoded = message.SerializeToString()
    # U+0000 is a zero byte in a string's UTF-8, so a message whose encoding holds none has no NUL
    # anywhere: one scan in C; the walk (which names the fields) only when there is a zero byte.
    if b"\x00" in encoded:
        _null_characters(message, "", violations)
    if _holds_json(message.DESCRIPTOR) and _NON_FINITE.search(encoded):
        _non_finite(message, "", violations)
    if violations:
        raise ValidationFailed(violations)


def _null_characters(message: Message, prefix: str, out: list[Violation]) -> None:
    """U+0000 in any string (map keys, Struct keys and values included) is
    refused by name: PostgreSQL cannot store it in text or JSONB, and no API
    value needs it. Well-known wrappers (Value, ListValue) add no path segment."""
    wrapper = message.DESCRIPTOR.full_name.startswith("google.protobuf.")
    for field, value in message.ListFields():
        path = prefix.rstrip(".") if wrapper else prefix + field.json_name
        for item_path, key, item in _entries(field, value, path):
            for text in (key, item):
                if isinstance(text, str) and "\x00" in text:
                    out.append(Violation(item_path, "null_character", text, {"noNullCharacters": True}))
            if isinstance(item, Message):
                _null_characters(item, item_path + ".", out)


@functools.cache
def _holds_json(descriptor: Descriptor) -> bool:
    """Whether a message of this type can hold a JSON value (a Value, Struct or ListValue field, at any depth):
    only those are scanned for a non-finite number (an upload's bytes are not)."""
    return _reaches_json(descriptor, set())


def _reaches_json(descriptor: Descriptor, seen: set[str]) -> bool:
    if descriptor.full_name in _JSON_TYPES:
        return True
    seen.add(descriptor.full_name)
    return any(field.message_type is not None and field.message_type.full_name not in seen
               and _reaches_json(field.message_type, seen) for field in descriptor.fields)


_JSON_TYPES = frozenset({"google.protobuf.Value", "google.protobuf.Struct", "google.protobuf.ListValue"})


def _non_finite(message: Message, prefix: str, out: list[Violation]) -> None:
    """NaN and the infinities in a JSON value (a Value, in a Struct or ListValue) are refused by name: JSON has
    no such number, so only a native gRPC caller can send one, and no reader of the value could print it as JSON
    (json_format refuses it, a 500). Paths as `_null_characters` names them."""
    wrapper = message.DESCRIPTOR.full_name.startswith("google.protobuf.")
    for field, value in message.ListFields():
        path = prefix.rstrip(".") if wrapper else prefix + field.json_name
        if field.full_name == "google.protobuf.Value.number_value":
            if not math.isfinite(value):
                out.append(_not_finite(path, value))
            continue
        if field.message_type is None:
            continue
        for item_path, _key, item in _entries(field, value, path):
            if isinstance(item, Message):
                _non_finite(item, item_path + ".", out)


def _entries(field: FieldDescriptor, value: Any, path: str) -> list[tuple[str, Any, Any]]:
    """A set field's (path, key, value) each: a map's entries (`path.key`, or `path[key]` for a number), a
    list's items (`path[i]`), or the one value (`path`, key None)."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        items: list[tuple[Any, Any]] = list(value.items())
    elif field.is_repeated:
        items = list(enumerate(value))
    else:
        return [(path, None, value)]
    return [(f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]", key, item) for key, item in items]


def _not_finite(path: str, value: float) -> Violation:
    """NaN or an infinity, echoed by its proto3 JSON name (JSON has no such number)."""
    said = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return Violation(path, "type", said, {"type": "finite number"})


def _walk(message: Message, prefix: str, out: list[Violation]) -> None:
    for field, rules, nested, repeated, floating in _plan(message.DESCRIPTOR):
        value = getattr(message, field.name)
        if floating:  # (an unset double reads 0.0: no presence test needed)
            if not (all(map(math.isfinite, value)) if repeated else math.isfinite(value)):
                # JSON's "NaN"/"Infinity" strings decode to one (proto3's mapping), as a native caller can send
                # it: NaN fails no bound, and no bound's violation could echo an infinity as JSON.
                path = prefix + field.json_name
                out.extend(_not_finite(path if index is None else f"{path}[{index}]", item)
                           for index, item in (enumerate(value) if repeated else [(None, value)])
                           if not math.isfinite(item))
                continue
            if rules is None:
                continue
        path = prefix + field.json_name
        present = not repeated and field.has_presence and message.HasField(field.name)
        if not repeated and field.has_presence and not present:
            value = None  # an absent message field or unset `optional` scalar
        if rules is not None:
            _check(rules, path, list(value) if repeated else value, repeated, out, present)
        if nested:
            if repeated:
                for i, item in enumerate(value):
                    _walk(item, f"{path}[{i}].", out)
            elif message.HasField(field.name):
                _walk(value, path + ".", out)


def check_closed_sets(message: Message) -> None:
    """A response holds only the values its string fields' closed sets declare
    (`one_of`, `one_of_enum`: a status, a state). Anything else is the server
    breaking its published contract (OpenAPI's `enum`, the SDKs' literal
    types): an internal error, logged with the field, and the unit of work is
    not committed."""
    violations: list[Violation] = []
    _closed_sets(message, "", violations)
    if violations:
        shown = ", ".join(f"{v.path}={v.value!r}" for v in violations)
        raise RuntimeError(f"{message.DESCRIPTOR.full_name} outside its declared closed sets: {shown}")


def _closed_sets(message: Message, prefix: str, out: list[Violation]) -> None:
    for field, rules, nested, repeated, _ in _plan(message.DESCRIPTOR):
        if rules is None and not nested:
            continue  # a double of no rules (in the plan to be held finite on requests)
        path = prefix + field.json_name
        value = getattr(message, field.name)
        if rules is not None and (rules.one_of or rules.one_of_enum) and field.type == field.TYPE_STRING:
            allowed = _allowed(rules)
            out.extend(Violation(path, "one_of", item, {"oneOf": list(allowed)})
                       for item in (value if repeated else [value]) if item and item not in allowed)
        if nested and not field.message_type.GetOptions().map_entry:
            for item in value if repeated else [value] if message.HasField(field.name) else []:
                _closed_sets(item, path + ".", out)


def _allowed(rules: options_pb2.FieldRules) -> tuple[str, ...]:
    return (*rules.one_of, *enum_wire_names(rules.one_of_enum)) if rules.one_of_enum else tuple(rules.one_of)


@functools.cache
def enum_wire_names(enum_name: str) -> tuple[str, ...]:
    """The `(persona.v1.wire_name)`s of an enum's values, in declaration order."""
    enum = descriptor_pool.Default().FindEnumTypeByName(enum_name)
    return tuple(v.GetOptions().Extensions[options_pb2.wire_name] for v in enum.values
                 if v.GetOptions().HasExtension(options_pb2.wire_name))


def _check(rules: options_pb2.FieldRules, path: str, value: Any, repeated: bool, out: list[Violation],
           present: bool = False) -> None:
    if rules.required and (value in ("", None) or (repeated and not value)):
        out.append(Violation(path, "required", value, {"required": True}))
        return
    if value is None:
        return  # absent: nothing to check
    # An `optional` field set explicitly is validated even when empty.
    if isinstance(value, (str, list)) and (value != "" or present):
        unit = "items" if repeated else "characters"
        if rules.min_len and len(value) < rules.min_len:
            out.append(Violation(path, "min_length", value, {"minLength": rules.min_len, "unit": unit}))
        if rules.max_len and len(value) > rules.max_len:
            shown: Any = value if len(value) <= 200 or repeated else str(value)[:200] + "…"
            out.append(Violation(path, "max_length", shown if not repeated else len(value), {"maxLength": rules.max_len, "unit": unit}))
    items = list(enumerate(value)) if repeated else [(None, value)]
    for index, item in items:
        item_path = path if index is None else f"{path}[{index}]"
        if isinstance(item, str) and item == "" and not (present and index is None):
            continue
        if (rules.one_of or rules.one_of_enum) and item not in (allowed := _allowed(rules)):
            out.append(Violation(item_path, "one_of", item, {"oneOf": list(allowed)}))
        if rules.format and isinstance(item, str) and not FORMATS[rules.format](item):
            out.append(Violation(item_path, "format", item, {"format": rules.format}))
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            if rules.HasField("min_value") and item < rules.min_value:
                out.append(Violation(item_path, "minimum", item, {"minimum": rules.min_value}))
            if rules.HasField("max_value") and item > rules.max_value:
                out.append(Violation(item_path, "maximum", item, {"maximum": rules.max_value}))
    if rules.unique and repeated:
        seen = set()
        for index, item in enumerate(value):
            if item in seen:
                out.append(Violation(f"{path}[{index}]", "unique", item, {"unique": True}))
            seen.add(item)
