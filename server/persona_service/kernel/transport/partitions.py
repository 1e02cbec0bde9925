"""Tables that age out (issue 49): append-only tables range-partitioned by month (the swap in
kernel/data/partition_swap.py), kept by one periodic job per table that makes the months ahead
and drops the months past the table's retention, whole partitions instead of rows one by one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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


# What goes with a dropped partition, in its transaction: given the partition (its `upper`: the rows before it
# are gone), what refers to its rows is removed (chat: the sessions whose messages it held).
Dropped = Callable[[Connection, Partition], object]


def age_out(engine: Engine, table: str, retention_days: int, now: datetime, dropped: Dropped | None = None) -> int:
    """A table's periodic job (`<name>.partitions`): one round of `plan_age_out`, in one transaction
    (with `dropped` for each partition dropped, oldest first). Returns how many partitions it made and dropped."""
    with engine.begin() as conn:
        partitions = MonthlyPartitions(conn, table)
        if not partitions.take_turn():
            return 0  # another process is at it
        existing = {p.name: p for p in partitions.partitions()}
        todo = plan_age_out(list(existing.values()), now, retention_days)
        for start, end in todo.make:
            partitions.make(start, end)
        for name in todo.drop:
            partitions.drop(name)
            if dropped is not None:
                dropped(conn, existing[name])
            log.info("%s: partition %s dropped, older than %d days", table, name, retention_days)
    return len(todo.make) + len(todo.drop)
