"""JSON as the OpenAI-compatible surface carries it (stream chunks, error bodies): objects whose values stay
`object` until the code that reads one checks it (the kernel's door exports no JSON alias, and a domain reads
no other domain's internals, so chat keeps its own, as scim.json_support does)."""

from __future__ import annotations

# A JSON object: keys are strings; a value is any JSON value, checked where it is read.
JSONObject = dict[str, object]


def as_object(value: object) -> JSONObject | None:
    """`value` if it is a JSON object (whose keys are strings), else None."""
    return value if isinstance(value, dict) else None


def first_object(value: object) -> JSONObject | None:
    """The first element of `value` if it is a non-empty list (or tuple) whose first element is an object."""
    return as_object(value[0]) if isinstance(value, (list, tuple)) and value else None
