"""PostgreSQL notifications: a connection of its own that LISTENs (the runners' claims, the webhook worker)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import psycopg
from sqlalchemy import Engine


@contextlib.contextmanager
def listening(engine: Engine, channels: Iterable[str]) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A driver connection of its own, taken out of the pool (LISTEN state never goes back to
    it), in autocommit and subscribed to `channels`; closed on exit."""
    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        assert conn is not None  # a live psycopg connection: it was just checked out
        raw.detach()
        conn.autocommit = True
        for channel in channels:
            conn.execute(f"LISTEN {channel}")
        yield conn
    finally:
        with contextlib.suppress(Exception):
            raw.close()
