"""A unit of work per RPC: one connection and one transaction, opened on
first use, committed by the request pipeline when the RPC succeeds and rolled
back when it fails. Domain services and repositories never commit.

Read-only RPCs get an autocommit connection instead: no BEGIN/COMMIT round
trips for a single SELECT. psycopg's own switch sets it, and puts it back
before the connection returns to the pool: SQLAlchemy's `isolation_level`
option did the same through its dialect on every checkout and return, about
30 µs of CPU a read (a tenth of the hot read's own Python work)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, text

from persona_service.kernel.data import read_cache
from persona_service.kernel.data.outages import connection_lost
from persona_service.kernel.data.work import Work

# The transaction's id if it wrote anything (PostgreSQL assigns one at the first write), else NULL.
_TRANSACTION_ID = text("SELECT CAST(CAST(pg_current_xact_id_if_assigned() AS text) AS bigint)")


class UnitOfWork:
    def __init__(self, engine: Engine, read_only: bool = False):
        self._engine = engine
        self._read_only = read_only
        self._conn: Connection | None = None
        # What the call's services are handed: its repositories and records, never `conn` (kernel.data.work).
        self.work = Work(lambda: self.conn)

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = self._engine.connect()
            if self._read_only:
                self._conn.connection.driver_connection.autocommit = True  # type: ignore[union-attr]
            else:
                self._conn.begin()
        return self._conn

    def commit(self) -> None:
        if self._conn is not None and not self._read_only:
            self._conn.commit()
            read_cache.committed(self._conn)  # what it changed leaves every process's read cache before it answers

    def transaction_id(self) -> int | None:
        """The id of what `commit` is about to commit, or None when it wrote nothing (or has not begun): read before
        the COMMIT, so that one whose answer is lost can be settled by asking the database (outages.committed)."""
        if self._conn is None or self._read_only:
            return None
        found: int | None = self._conn.execute(_TRANSACTION_ID).scalar()
        return found

    def begin_again(self) -> None:
        """Commit what the transaction ran so far and begin the next one at once, as `conn` begins the first (a
        `Prepared` statement runs past SQLAlchemy, which would otherwise begin it only at its next own statement,
        after what the guard saw). Nothing to do before the connection is opened."""
        if self._conn is not None and not self._read_only:
            # This class's commit, not a subclass's: a replica's read-your-writes mark (replicas.MarkedWrite) would
            # run a statement, which begins a transaction SQLAlchemy then refuses to begin again; what ran before
            # the operation is marked with the operation's own commit.
            UnitOfWork.commit(self)
            self._conn.begin()

    def close(self) -> None:
        """Roll back whatever was not committed and return the connection.
        One the database dropped (a restart) is discarded: its server rolled
        it back, and its rollback failing must not hide the error that ended
        the unit of work (psycopg notices a connection PgBouncer closed only
        at its next use, which is this rollback)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self._read_only and not conn.invalidated:
                try:
                    conn.connection.driver_connection.autocommit = False  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - a result left open, a broken connection: discarded instead
                    conn.invalidate()  # never back in the pool in autocommit
            conn.close()
        except Exception as exc:
            if not connection_lost(exc):
                raise
            if not conn.closed:  # else the failed rollback discarded it already
                conn.invalidate()


def in_batches(engine: Engine, step: Callable[[Work], int], size: int) -> list[int]:
    """Run `step` (one batch: it handles at most `size` things and says how
    many), each run in a transaction of its own, until a batch comes back
    short; how many each handled. Bulk maintenance (the retention purge)
    holds its locks and writes its WAL a batch at a time: concurrent writers
    wait for a batch at most, and a crash loses one batch's work."""
    done: list[int] = []
    while True:
        with engine.begin() as conn:
            done.append(step(Work.on(conn)))
        if done[-1] < size:
            return done
