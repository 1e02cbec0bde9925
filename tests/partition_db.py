"""What the tests of a table partitioned by month (issue 49) share: a PostgreSQL server of their own, a
database at the revision before a swap, and the table's partitions as the catalog has them."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

import pytest
from persona_service.kernel.data import migrate
from persona_service.kernel.data.embedded import postgres_url
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.partitions_repository import MonthlyPartitions
from persona_service.registry import MODULES
from sqlalchemy import Engine, make_url, text


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
