"""JSON as the personas module stores it (step outputs, souls, voices: JSON columns and a run's checkpoints):
values stay `object` until read through these readers (the kernel's JSONObject and readers, and personas' own)."""

from __future__ import annotations

from persona_service.kernel.api import JSONObject, as_object
from persona_service.kernel.api import json_items as items

__all__ = ["JSONObject", "as_object", "items", "number", "whole"]


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
