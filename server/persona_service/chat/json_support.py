"""JSON as the OpenAI-compatible surface carries it (stream chunks, error bodies): objects whose values stay
`object` until the code that reads one checks it (the kernel's JSONObject and readers, and chat's own)."""

from __future__ import annotations

from persona_service.kernel.api import JSONObject, as_object

__all__ = ["JSONObject", "as_object", "first_object"]


def first_object(value: object) -> JSONObject | None:
    """The first element of `value` if it is a non-empty list (or tuple) whose first element is an object."""
    return as_object(value[0]) if isinstance(value, (list, tuple)) and value else None
