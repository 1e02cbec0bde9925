"""Readiness checks: each a name, whether it passed, what was seen."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import Connection

from persona_service.kernel.api import migration_script_heads
from persona_service.probes.repository import ProbeRepository


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@functools.cache
def migration_heads(version_dirs: tuple[str, ...]) -> frozenset[str]:
    """The heads of the migration scripts this code ships (read once)."""
    import pathlib

    return migration_script_heads(pathlib.Path(d) for d in version_dirs)


def readiness(connect: Callable[[], AbstractContextManager[Connection]], ping_redis: Callable[[], object],
              version_dirs: Iterable[str]) -> list[Check]:
    checks = []
    try:
        with connect() as conn:
            applied = ProbeRepository(conn).applied_migrations(timeout_ms=2000)
        checks.append(Check("postgres", True))
        heads = migration_heads(tuple(sorted(version_dirs)))
        checks.append(Check("migrations", applied == heads, ",".join(sorted(applied)) or "none"))
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        checks += [Check("postgres", False, type(exc).__name__), Check("migrations", False, "unknown")]
    try:
        ping_redis()
        checks.append(Check("redis", True))
    except Exception as exc:  # noqa: BLE001
        checks.append(Check("redis", False, type(exc).__name__))
    checks.append(Check("server", True, "this process answers"))
    return checks
