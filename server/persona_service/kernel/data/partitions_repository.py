"""Tables range-partitioned by month (issue 49): the partitions of one, made ahead and retired
once their month is past the table's retention (kernel/transport/partitions.py runs the job;
kernel/data/partition_swap.py is the online migration that partitions a table)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, text
from sqlalchemy.exc import OperationalError

from persona_service.kernel.data.records import records


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    upper: datetime | None  # where its range ends (exclusive); None: it has no end (MAXVALUE, DEFAULT)
    lower: datetime | None = None  # where it begins; None: it has no start (MINVALUE, DEFAULT)


# The partitions' catalog entries, each with the end of its range (PostgreSQL keeps a bound as an
# expression: `FOR VALUES FROM (…) TO ('2027-01-01 00:00:00+00')`; MAXVALUE and DEFAULT have no quoted end).
_PARTITIONS = text(r"""
    SELECT c.relname AS name,
           CAST(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$TO \('([^']+)'\)$$) AS timestamptz) AS upper,
           CAST(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$FROM \('([^']+)'\)$$) AS timestamptz) AS lower
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = CAST(:table AS regclass)
    ORDER BY upper NULLS LAST
""")
# A partition detached and not yet dropped (a round that ended between the two): marked before its detach.
_RETIRED = text("""
    SELECT c.relname FROM pg_class c
    JOIN pg_description d ON d.objoid = c.oid AND d.classoid = CAST('pg_class' AS regclass) AND d.objsubid = 0
    WHERE d.description = :mark AND c.relkind = 'r' AND NOT c.relispartition
      AND c.relnamespace = CAST(current_schema() AS regnamespace)
    ORDER BY c.relname
""")
_PENDING = text("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = CAST(:table AS regclass) AND i.inhdetachpending")
# Each step of the job waits at most this long for its locks, then gives way and tries again a moment later:
# writers queued behind a step that waits (on a long transaction) wait no longer than this.
LOCK_WAIT_MS = 200
# Tries a step gets, a second or so apart (each may hold others up to LOCK_WAIT_MS): then the round fails and the
# next one (an hour later) goes on from where it was.
LOCK_TRIES = 30


def month_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def month_after(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=UTC)


def partition_name(table: str, start: datetime) -> str:
    """`<table>_pYYYYMM`: the partition of the month `start` begins (the swap's old rows: `<table>_legacy`)."""
    return f"{table}_p{start:%Y%m}"


class MonthlyPartitions:
    """One table's range partitions by month (UTC), named by `partition_name`. Its job's steps (`make`,
    `retire`, `drop_retired`) run on a connection in autocommit, each a short transaction of its own:
    `DETACH … CONCURRENTLY` cannot run in a transaction block, and a step holding a table's lock for the
    whole round would stop its writers for as long."""

    def __init__(self, conn: Connection, table: str):
        self.conn, self.table = conn, table
        self.quote = conn.dialect.identifier_preparer.quote

    def take_turn(self) -> bool:
        """Whether this connection is the one changing the table's partitions now (every runner runs the
        job: one at a time; the others skip their round). Held until `give_turn`, or the connection's end
        (a process that dies gives it back)."""
        turn = text("SELECT pg_try_advisory_lock(hashtextextended(:key, 0))")
        return bool(self.conn.execute(turn, {"key": f"{self.table} partitions"}).scalar_one())

    def give_turn(self) -> None:
        self.conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:key, 0))"),
                          {"key": f"{self.table} partitions"})

    def partitions(self) -> list[Partition]:
        return records(Partition, self.conn.execute(_PARTITIONS, {"table": self.table}).mappings())

    def make(self, start: datetime, end: datetime) -> None:
        """The partition of [start, end), named by its first month."""
        self._bounded(lambda: f"CREATE TABLE IF NOT EXISTS {self.quote(partition_name(self.table, start))} "
                              f"PARTITION OF {self.quote(self.table)} "
                              f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')")

    def retire(self, name: str) -> None:
        """The partition marked retired, then detached without stopping the table's readers and writers
        (`DETACH … CONCURRENTLY` takes a lock that conflicts with neither, then waits for the transactions
        that may still see the partition). One stopped in its second step stays "pending detach": any
        such partition of the table is finished first (`FINALIZE`), here and by every later round."""
        self._bounded(lambda: f"COMMENT ON TABLE {self.quote(name)} IS '{self._mark}'")
        for pending in self._pending():
            self._detach(pending)
        if name in {p.name for p in self.partitions()}:
            self._detach(name)

    def drop_retired(self) -> list[str]:
        """The detached partitions dropped (a round's own and any a stopped round left): whole files, no rows."""
        names = list(self.conn.execute(_RETIRED, {"mark": self._mark}).scalars())
        for name in names:
            self._bounded(lambda name=name: f"DROP TABLE IF EXISTS {self.quote(name)}")  # type: ignore[misc]
        return names

    @property
    def _mark(self) -> str:
        return f"retired from {self.table}"

    def _pending(self) -> list[str]:
        return list(self.conn.execute(_PENDING, {"table": self.table}).scalars())

    def _detach(self, name: str) -> None:
        """Detached concurrently, or (pending after a try that stopped) finalized; tried again while its locks
        are not to be had at once."""
        def statement() -> str:
            how = "FINALIZE" if name in self._pending() else "CONCURRENTLY"
            return f"ALTER TABLE {self.quote(self.table)} DETACH PARTITION {self.quote(name)} {how}"
        self._bounded(statement)

    def _bounded(self, statement: Callable[[], str]) -> None:
        """One statement (in autocommit: a transaction of its own), its lock waits at most LOCK_WAIT_MS: one
        that would wait longer gives way and is tried again a moment later, built anew (its state may have
        changed). A step that waits holds the queue behind it: this bounds how long others wait on it."""
        self.conn.execute(text(f"SET lock_timeout = '{LOCK_WAIT_MS}ms'"))
        try:
            for _ in range(LOCK_TRIES):
                try:
                    self.conn.execute(text(statement()))
                    return
                except OperationalError as exc:
                    if getattr(exc.orig, "sqlstate", "") not in ("55P03", "40P01"):  # lock_not_available, deadlock
                        raise
                time.sleep(random.uniform(0.5, 1.5))
            raise TimeoutError(f"{self.table}: no turn at the locks of {statement()!r} in {LOCK_TRIES} tries")
        finally:
            self.conn.execute(text("RESET lock_timeout"))
