"""JSON as the personas module stores it (step outputs, souls, voices: JSON columns and a run's checkpoints):
values stay `object` until read through these readers (the kernel's door exports no JSON alias, and a domain
reads no other domain's internals, so personas keeps its own, as scim.json_support does)."""

from __future__ import annotations

# A JSON object: keys are strings; a value is any JSON value, checked where it is read.
JSONObject = dict[str, object]


def as_object(value: object) -> JSONObject | None:
    """`value` if it is a JSON object (whose keys are strings), else None."""
    return value if isinstance(value, dict) else None


def items(value: object) -> list[object]:
    """A JSON array's values, a new list (anything else: none)."""
    return list(value) if isinstance(value, (list, tuple)) else []


def number(value: object) -> float:
    """A JSON number as a float; what float() refuses (a list, an object) is the TypeError it always was."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"a number was expected, not {type(value).__name__}")


def whole(value: object) -> int:
    """A JSON number as an int, as int() reads it; anything else: a TypeError."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"an integer was expected, not {type(value).__name__}")
