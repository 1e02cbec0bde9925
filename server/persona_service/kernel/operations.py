"""Long operations as generators: they yield progress (forwarded by the
streaming RPCs as server-sent events) and return their result. Each operation's progress is a typed
record of its domain's (personas' `PipelineProgress`, chat's `MessageProgress`), never a dict."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

R = TypeVar("R")


def drain(gen: Generator[object, None, R]) -> R:
    """Run an operation to the end (the unary RPCs); return its result. Its progress, whatever its type, is
    dropped (a generator yields it covariantly: any operation is a Generator[object, None, R])."""
    while True:
        try:
            next(gen)
        except StopIteration as done:
            result: R = done.value
            return result
