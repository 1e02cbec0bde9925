"""Tables that age out (issue 49): append-only tables range-partitioned by month (the swap in
kernel/data/partition_swap.py), kept by one periodic job per table that makes the months ahead
and drops the months past the table's retention, whole partitions instead of rows one by one.

Online: a round is a sequence of short steps, none waiting for a lock its table's readers and writers
need for longer than LOCK_WAIT_MS (partitions_repository): a month past the retention is detached
concurrently, what referred to its rows is removed in small batches, each a transaction of its own,
then the detached table is dropped. A round that stops anywhere (the process dies, a lock is not to be
had) leaves a state the next round finishes: a "pending detach" partition finalized, the rest of the
batches run (they remove what is older than every partition left), a detached table dropped (each is
marked before its detach)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine

from persona_service.kernel.data.partitions_repository import (
    MonthlyPartitions,
    Partition,
    month_after,
    month_start,
)

log = logging.getLogger(__name__)

MONTHS_AHEAD = 2  # months after the current one whose partitions always exist (the job runs hourly)
EVERY = 3600  # seconds between two rounds of a table's job


@dataclass(frozen=True)
class AgeOut:
    """One round of a table's upkeep: the months to make ([start, end) each), the partitions to drop."""

    make: list[tuple[datetime, datetime]]
    drop: list[str]


def plan_age_out(partitions: Sequence[Partition], now: datetime, retention_days: int) -> AgeOut:
    """Every month from the last partition's end through MONTHS_AHEAD months after now's is made;
    a partition whose whole range is older than the retention (it ends by now - retention) is
    dropped, the partition of the current month never; 0 days keeps every one."""
    horizon = month_start(now)
    for _ in range(MONTHS_AHEAD + 1):
        horizon = month_after(horizon)
    ends = [p.upper for p in partitions]
    make = []
    if None not in ends:  # (a partition without an end covers every month after)
        start = max((e for e in ends if e is not None), default=month_start(now)).astimezone(UTC)
        while start < horizon:
            make.append((start, month_after(start)))
            start = month_after(start)
    cutoff = now - timedelta(days=retention_days)
    drop = [p.name for p in partitions if retention_days and p.upper is not None and p.upper <= cutoff]
    return AgeOut(make, drop)


# What refers to rows of retired partitions, removed after their detach and before their drop (chat: the
# sessions whose messages they hold): given `before`, the start of the oldest partition left, it removes at most
# one small batch of what is older, in the transaction it is given, and says how many; called again, a
# transaction each, until 0.
Orphaned = Callable[[Connection, datetime], int]


def age_out(engine: Engine, table: str, retention_days: int, now: datetime, orphaned: Orphaned | None = None) -> int:
    """A table's periodic job (`<name>.partitions`): one round of `plan_age_out` in short steps (above): the
    months made and those past the retention detached; with a retention, `orphaned`'s batches; then the
    detached tables dropped. Returns how many partitions it made and detached."""
    with _turn(engine, table) as partitions:
        if partitions is None:
            return 0  # another process is at it
        todo = plan_age_out(partitions.partitions(), now, retention_days)
        for start, end in todo.make:
            partitions.make(start, end)
        for name in todo.drop:  # oldest first
            partitions.retire(name)
            log.info("%s: partition %s detached, older than %d days", table, name, retention_days)
        left = partitions.partitions()
        before = left[0].lower if left and retention_days else None
    # Before the drop: dropping a detached table whose foreign key refers to another table takes that table's
    # ACCESS EXCLUSIVE lock a moment (its triggers go), which a busy table may not grant within a round's tries;
    # what refers to the month is gone by then whatever the drop does (a detached table's key still cascades).
    if orphaned is not None and before is not None:
        removed = 0
        while True:
            with engine.begin() as batch:
                done = orphaned(batch, before)
            if not done:
                break
            removed += done
        if removed:
            log.info("%s: %d rows referring to the retired months removed", table, removed)
    with _turn(engine, table) as partitions:
        for name in partitions.drop_retired() if partitions is not None else ():
            log.info("%s: partition %s dropped", table, name)
    return len(todo.make) + len(todo.drop)


@contextmanager
def _turn(engine: Engine, table: str) -> Iterator[MonthlyPartitions | None]:
    """The table's partitions on a connection in autocommit holding the table's turn; None: another has it."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        partitions = MonthlyPartitions(conn, table)
        if not partitions.take_turn():
            yield None
            return
        try:
            yield partitions
        finally:
            partitions.give_turn()
