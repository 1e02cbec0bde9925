"""JSON values as the service carries them: a JSON object is `dict[str, object]`, its values checked where they
are read (a domain's typed readers, or a record made once the object is checked), never `Any` (issue 47)."""

from __future__ import annotations

# A JSON object: keys are strings; a value is any JSON value, checked where it is read.
JSONObject = dict[str, object]


def as_object(value: object) -> JSONObject | None:
    """`value` if it is a JSON object, else None."""
    return value if isinstance(value, dict) else None


def items(value: object) -> list[object]:
    """A JSON array's values, a new list (anything else: none)."""
    return list(value) if isinstance(value, (list, tuple)) else []
