"""Long operations as generators: they yield progress (forwarded by the
streaming RPCs as server-sent events) and return their result."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

Progress = dict[str, Any]


def drain(gen: Generator[Any, None, Any]) -> Any:
    """Run an operation to the end (the unary RPCs); return its result."""
    while True:
        try:
            next(gen)
        except StopIteration as done:
            return done.value
