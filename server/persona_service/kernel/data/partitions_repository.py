"""Tables range-partitioned by month (issue 49): the partitions of one, made ahead and dropped
once their month is past the table's retention (kernel/transport/partitions.py runs the job;
kernel/data/partition_swap.py is the online migration that partitions a table)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from persona_service.kernel.data.records import records


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    upper: datetime | None  # where its range ends (exclusive); None: it has no end (MAXVALUE, DEFAULT)


# The partitions' catalog entries, each with the end of its range (PostgreSQL keeps a bound as an
# expression: `FOR VALUES FROM (…) TO ('2027-01-01 00:00:00+00')`; MAXVALUE and DEFAULT have no quoted end).
_PARTITIONS = text(r"""
    SELECT c.relname AS name,
           CAST(substring(pg_get_expr(c.relpartbound, c.oid) FROM $$TO \('([^']+)'\)$$) AS timestamptz) AS upper
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = CAST(:table AS regclass)
    ORDER BY upper NULLS LAST
""")


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
    """One table's range partitions by month (UTC), named by `partition_name`."""

    def __init__(self, conn: Connection, table: str):
        self.conn, self.table = conn, table

    def take_turn(self) -> bool:
        """Whether this transaction is the one changing the table's partitions now (every runner runs
        the job: one at a time; the others skip their round). Lock waits are bounded too: making or
        dropping a partition locks the whole table, and a change stuck behind a long reader would
        queue every write behind it (it fails instead, retried next round)."""
        self.conn.execute(text("SELECT set_config('lock_timeout', '5s', true)"))
        turn = text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))")
        return bool(self.conn.execute(turn, {"key": f"{self.table} partitions"}).scalar_one())

    def partitions(self) -> list[Partition]:
        return records(Partition, self.conn.execute(_PARTITIONS, {"table": self.table}).mappings())

    def make(self, start: datetime, end: datetime) -> None:
        """The partition of [start, end), named by its first month."""
        quote = self.conn.dialect.identifier_preparer.quote
        self.conn.execute(text(f"CREATE TABLE IF NOT EXISTS {quote(partition_name(self.table, start))} "
                               f"PARTITION OF {quote(self.table)} "
                               f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"))

    def drop(self, name: str) -> None:
        self.conn.execute(text(f"DROP TABLE IF EXISTS {self.conn.dialect.identifier_preparer.quote(name)}"))
