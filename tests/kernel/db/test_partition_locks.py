"""A swap's locks give way (kernel/data/partition_swap.py `lock_in_order`, issue 49): a migration that
waits for a table's lock behind a long reader does not hold the writers queued behind it until the reader
ends; it steps back, so their inserts go on, and takes the lock once the reader is gone. (Waiting in the
queue instead is how 0035's first run met a writer in a cycle and PostgreSQL failed the writer.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from partition_db import database_at, own_server
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.partition_swap import lock_in_order
from sqlalchemy import Engine, text


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    return own_server(tmp_path_factory)


@pytest.fixture
def engine(server_url) -> Iterator[Engine]:
    url, made = database_at(server_url, "partition_locks", "0001")
    made.dispose()
    engine = make_engine(url, pool_size=4)  # a reader, the migration, a writer, the watcher
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE swapped (id int)"))
    yield engine
    engine.dispose()


def _waiting_for_the_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE swapped%'",
        )).scalar_one())


def test_a_migration_waiting_behind_a_reader_lets_writers_through(engine):
    reader = engine.connect()
    reader.begin()
    reader.execute(text("SELECT count(*) FROM swapped"))  # ACCESS SHARE, held until it ends
    taken = threading.Event()

    def migrate() -> None:
        with engine.connect() as conn, conn.begin():
            with Operations.context(MigrationContext.configure(conn)):
                lock_in_order(("swapped", "ACCESS EXCLUSIVE"))
            taken.set()

    swap = threading.Thread(target=migrate)
    swap.start()
    try:
        while not _waiting_for_the_lock(engine):  # the migration is in the lock's queue
            assert swap.is_alive()
        with engine.begin() as writer:  # not queued behind it for good: the migration steps back
            writer.execute(text("SET LOCAL lock_timeout = '20s'"))  # (fails, not hangs, if it waited for the reader)
            writer.execute(text("INSERT INTO swapped VALUES (1)"))
        assert not taken.is_set()  # and it has not taken the lock from the reader
    finally:
        reader.rollback()
        reader.close()
        swap.join()
    assert taken.is_set()  # once the reader is gone
