"""Two requests at once, made to meet where a race is decided: the test holds
a table's writes (`support.writes_locked`) or a row (`row_locked`), starts
the requests in order, waits until each waits on a lock in PostgreSQL, then
lets them all go (waiters on one row go in the order they came)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from persona_service.process.stack import Stack
from sqlalchemy import text
from support import writes_locked


def lock_waiters(engine) -> int:
    """Backends of this database waiting on a lock (a table's, a row's, an advisory one)."""
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                 "AND datname = current_database()")).scalar_one()


def wait_for_waiters(engine, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while lock_waiters(engine) < count:
        assert time.monotonic() < deadline, f"fewer than {count} requests came to wait on a lock"
        time.sleep(0.02)


@contextlib.contextmanager
def row_locked(engine, table: str, row_id: str) -> Iterator[None]:
    """Hold the row `id = row_id` of `table` FOR UPDATE until the block ends."""
    with engine.connect() as conn, conn.begin():
        conn.execute(text(f"SELECT 1 FROM {table} WHERE id = :id FOR UPDATE"), {"id": row_id})
        yield


def at_once(engine, hold: str | contextlib.AbstractContextManager, *calls: Callable[[], Any]) -> list[Any]:
    """Run `calls` while `hold` is held (a table name: its writes), in order,
    each started once the ones before it wait on a lock; then release them.
    Their results, in the same order."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures: list[Future] = []
        with writes_locked(engine, hold) if isinstance(hold, str) else hold:
            for n, call in enumerate(calls, start=1):
                futures.append(pool.submit(call))
                wait_for_waiters(engine, n)
        return [f.result(timeout=60) for f in futures]


def reruns(stack: Stack) -> float:
    """Unary calls the stack's servers ran again after PostgreSQL aborted their transaction (a deadlock it broke,
    40P01; a snapshot it could not keep, 40001): `persona_db_reruns_total` over every RPC and process. The rerun
    hides a lock-order cycle from the answers (they are a serial order's, a second late); this shows it."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(stack.metrics_dir))
    return sum(s.value for m in registry.collect() for s in m.samples if s.name == "persona_db_reruns_total")
