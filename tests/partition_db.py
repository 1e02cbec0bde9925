"""What the tests of a table partitioned by month (issue 49) share: a PostgreSQL server of their own, a
database at the revision before a swap, the table's partitions as the catalog has them, and a retention
round run beside writers."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from persona_service.kernel.data import migrate
from persona_service.kernel.data.embedded import postgres_url
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.partitions_repository import MonthlyPartitions
from persona_service.registry import MODULES
from sqlalchemy import Connection, Engine, make_url, text
from sqlalchemy.exc import OperationalError


def own_server(tmp_path_factory) -> str:
    """An embedded server (a database per test is made on it; not on a shared DATABASE_URL)."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("needs a PostgreSQL server of its own")
    return postgres_url(tmp_path_factory.mktemp("postgres"))


def database_at(server_url: str, name: str, revision: str) -> tuple[str, Engine]:
    """A new database `name` (a test's name, made a database's) migrated to `revision`."""
    name = re.sub(r"\W", "_", name)[:60]
    admin = make_engine(server_url, pool_size=1)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url, MODULES.migrations, revision)
    return url, make_engine(url, pool_size=1)


def partition_names(engine: Engine, table: str) -> list[str]:
    with engine.connect() as conn:
        return [p.name for p in MonthlyPartitions(conn, table).partitions()]


def legacy_bound(engine: Engine, table: str) -> datetime:
    """Where the table as it was (now the partition `<table>_legacy`) ends."""
    with engine.connect() as conn:
        legacy = next(p for p in MonthlyPartitions(conn, table).partitions() if p.name == f"{table}_legacy")
    assert legacy.upper is not None
    return legacy.upper.astimezone(UTC)


def month_of(table: str, start: datetime) -> str:
    return f"{table}_p{start:%Y%m}"


def partition_of(engine: Engine, table: str, key: str) -> dict[str, str]:
    """Each row's `key` -> the partition holding it."""
    with engine.connect() as conn:
        return dict(conn.execute(text(f"SELECT {key}, tableoid::regclass::text FROM {table}")).all())


@dataclass
class GivingWay:
    """What `while_a_writer_waits` saw: the job's answer, the second writer's error (None: it got through)."""

    job: object = None
    job_error: BaseException | None = None
    writer_error: BaseException | None = None


def while_a_writer_waits(url: str, job: Callable[[], object], hold: Callable[[Connection], None],
                         write: Callable[[Connection], None]) -> GivingWay:
    """A retention round (`job`) run while a writer's transaction (`hold`, on a month the round keeps) stays
    open; once the round is seen waiting on a lock, a second writer (`write`, another row of a kept month)
    runs with `lock_timeout` 1 s: a round that keeps its place in the lock queue while it waits (the
    previous one-transaction job: its DROP's ACCESS EXCLUSIVE, up to 5 s) stops that writer past its
    timeout; one that gives way after a bounded wait lets it through. Then the first writer commits and
    the round ends. A lock wait observed (the writer's timeout, pg_stat_activity), no wall-clock bound."""
    engine = make_engine(url, pool_size=3)
    seen = GivingWay()

    def run() -> None:
        try:
            seen.job = job()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            seen.job_error = exc

    try:
        with engine.connect() as holder:
            holder.begin()
            hold(holder)
            thread = threading.Thread(target=run)
            thread.start()
            with engine.connect() as watch:
                for _ in range(500):  # the round's DDL waiting on the open writer (a few ms apart)
                    waiting = watch.execute(text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' AND query ~* '^\\s*(ALTER|DROP|COMMENT|CREATE)'")).scalar_one()
                    if waiting or not thread.is_alive():
                        break
                    time.sleep(0.02)
            assert thread.is_alive(), f"the round ended without waiting on the open writer: {seen}"
            try:
                with engine.begin() as writer:
                    writer.execute(text("SET LOCAL lock_timeout = '1s'"))
                    write(writer)
            except OperationalError as exc:
                seen.writer_error = exc
            holder.commit()
            thread.join(timeout=120)
    finally:
        engine.dispose()
    return seen
