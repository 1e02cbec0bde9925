"""Readiness: whether this process can serve calls (PostgreSQL at the migrations this code ships, Redis).

Servicers get the outcome, never what is checked: `ServicerDeps.readiness` is a function that runs the
checks (`readiness_of`), so the probe needs no connection of its own nor the Redis client."""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from persona_service.kernel.data.migrate import alembic_config, applied_heads
from persona_service.kernel.resources import Check

if TYPE_CHECKING:
    import redis
    from sqlalchemy import Connection, Engine


@functools.cache
def migration_heads(version_dirs: tuple[str, ...]) -> frozenset[str]:
    """The heads of the migration scripts this code ships (read once): what a database it runs on has applied."""
    from alembic.script import ScriptDirectory  # here, not at import (docs/testing.md)

    dirs = [pathlib.Path(d) for d in version_dirs]
    return frozenset(ScriptDirectory.from_config(alembic_config("postgresql://unused", dirs)).get_heads())


def readiness(connect: Callable[[], AbstractContextManager[Connection]], ping_redis: Callable[[], object],
              version_dirs: Iterable[str]) -> list[Check]:
    return [*_database(connect, tuple(sorted(version_dirs))), _redis(ping_redis), Check("server", True, "this process answers")]


def _database(connect: Callable[[], AbstractContextManager[Connection]], version_dirs: tuple[str, ...]) -> list[Check]:
    try:
        with connect() as conn:
            applied = applied_heads(conn, timeout_ms=2000)
        heads = migration_heads(version_dirs)
        return [Check("postgres", True), Check("migrations", applied == heads, ",".join(sorted(applied)) or "none")]
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        return [Check("postgres", False, type(exc).__name__), Check("migrations", False, "unknown")]


def _redis(ping_redis: Callable[[], object]) -> Check:
    try:
        ping_redis()
        return Check("redis", True)
    except Exception as exc:  # noqa: BLE001 - reported, never raised
        return Check("redis", False, type(exc).__name__)


def readiness_of(engine: Engine, client: redis.Redis, version_dirs: Iterable[pathlib.Path]) -> Callable[[], list[Check]]:
    """The checks as one function of nothing: it closes over the pool's `connect` and Redis's `ping` (so reaches
    the engine and the client, as tests/kernel/test_capabilities.py's allow-list says), nothing else."""
    connect, ping, dirs = engine.connect, client.ping, tuple(str(d) for d in version_dirs)
    return lambda: readiness(connect, ping, dirs)
