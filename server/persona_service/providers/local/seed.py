"""Deterministic choice for the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file seeds
every choice from sha256 of the relevant input (never Python's `hash()`,
which is randomised per process), so the same input gives the same output.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class _Seed:
    def __init__(self, *parts: str):
        self.key = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()

    def number(self, salt: str) -> int:
        return int(hashlib.sha256(f"{self.key}:{salt}".encode()).hexdigest(), 16)

    def pick(self, salt: str, options: Sequence[T]) -> T:
        return options[self.number(salt) % len(options)]

    def sample(self, salt: str, options: Sequence[T], k: int) -> list[T]:
        return sorted(options, key=lambda o: self.number(f"{salt}:{o}"))[:k]


def _short_hash(*parts: str, length: int = 16) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:length]
