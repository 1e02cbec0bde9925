"""Bodies of every shape from one valid body: each place in it (a key's value or an item, nested) replaced by
each JSON type. An oracle over inputs nobody listed: whatever a caller sends in place of a value, the answer is
an error in the envelope or a success, never a 5xx (tests/test_free_json_http.py, tests/scim/test_wrong_types_http.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

# One of each JSON type, and the containers empty, holding a wrong type, and holding an object.
SHAPES: tuple[Any, ...] = (None, True, 7, "text", [], [7], {}, {"value": 7})


def places(doc: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON document (each key and item, nested), the document itself excluded."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield (*at, key)
        yield from places(value, (*at, key))


def with_value(doc: Any, place: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(doc)
    inner = changed
    for key in place[:-1]:
        inner = inner[key]
    inner[place[-1]] = value
    return changed


def shaped(doc: Any) -> Iterator[tuple[str, Any, Any]]:
    """(where and what, the shape put there, the body) for every place and shape."""
    for place in places(doc):
        for value in SHAPES:
            yield "/".join(map(str, place)) + f" = {value!r}", value, with_value(doc, place, value)


def variants(doc: Any) -> Iterator[tuple[str, Any]]:
    """(where and what, the body) for every place and shape."""
    for what, _, body in shaped(doc):
        yield what, body


def as_text(value: Any) -> set[str]:
    """What a value that is not a string reads as once turned into one (`str(7)`, `str({'value': 7})`): a
    string field holding one of these took a value of another type."""
    return set() if isinstance(value, str) else {str(value), repr(value), json.dumps(value)}


def strings(value: Any) -> Iterator[str]:
    """Every string in a record, a dataclass's fields and containers' items included."""
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from strings(getattr(value, field.name))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)
