"""Resource ids: a type prefix and a cuid2-shaped id (`org_…`, `ws_…`, `chs_…`): 24 characters, a letter then
base 36.

They are drawn from the OS CSPRNG (119 bits an id): collision-resistant across processes and hosts without
coordination, as cuid2 is, for ~5 µs an id where the cuid2 package took ~90 (a SHA3-512 and the base-36 of its
512-bit number in Python; six ids a persona creation, issue 50). The prefix makes an id's type readable in logs
and lets the API reject an id of the wrong type cheaply.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping

# Kinds the kernel itself issues; modules register theirs (Module.id_prefixes).
PREFIXES: dict[str, str] = {
    "event": "evt",
    "request": "req",
    "audit_event": "aud",
}


def register(prefixes: Mapping[str, str]) -> None:
    """Add a module's id kinds; a kind or prefix may belong to one module only."""
    taken = {prefix: kind for kind, prefix in PREFIXES.items()}
    for kind, prefix in prefixes.items():
        if PREFIXES.get(kind, prefix) != prefix or taken.get(prefix, kind) != kind:
            raise RuntimeError(f"id kind {kind!r} / prefix {prefix!r} clashes with an existing one")
        PREFIXES[kind] = prefix
        taken[prefix] = kind


def is_uuid(value: str) -> bool:
    """A uuid in its canonical form (any case): the ids the spec gives as uuids."""
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def new_id(kind: str) -> str:
    return new_ids(kind, 1)[0]


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_ids(kind: str, n: int) -> list[str]:
    """`n` ids of `kind` (a prefix, then 24 characters: a letter, then base 36), 119 bits from the OS CSPRNG
    each (one read for all), so collisions stay negligible without coordination."""
    prefix = PREFIXES[kind] + "_"
    raw = os.urandom(16 * n)
    out = []
    for i in range(n):
        v = int.from_bytes(raw[16 * i:16 * i + 16])
        v, first = divmod(v, 26)
        chars = [_LETTERS[first]]
        for _ in range(23):
            v, d = divmod(v, 36)
            chars.append(_BASE36[d])
        out.append(prefix + "".join(chars))
    return out


def has_prefix(kind: str, value: str) -> bool:
    return value.startswith(PREFIXES[kind] + "_")
