"""Units of work (kernel/data/uow.py): a read-only one reads on an autocommit
connection (no BEGIN/COMMIT round trips) and hands the connection back to
the pool as it found it, so the next unit of work on it is transactional."""

from __future__ import annotations

from persona_service.kernel.data.uow import UnitOfWork
from psycopg.pq import TransactionStatus
from sqlalchemy import text
from support import engine_for


def _status(uow: UnitOfWork) -> TransactionStatus:
    return uow.conn.connection.driver_connection.info.transaction_status  # type: ignore[union-attr]


def test_a_read_only_unit_of_work_reads_outside_a_transaction_and_returns_its_connection_transactional(stack):
    with engine_for(stack, pool_size=1) as engine:  # one connection: both units of work get the same one
        reading = UnitOfWork(engine, read_only=True)
        assert reading.conn.execute(text("SELECT 1")).scalar_one() == 1  # Core, as repositories read
        assert _status(reading) == TransactionStatus.IDLE  # no transaction was opened
        reading.commit()  # nothing to commit
        reading.close()

        writing = UnitOfWork(engine)
        writing.conn.execute(text("SELECT 1"))
        assert _status(writing) == TransactionStatus.INTRANS
        assert not writing.conn.connection.driver_connection.autocommit  # type: ignore[union-attr]
        writing.close()


def test_a_read_only_connection_that_cannot_be_put_back_is_discarded_not_pooled_in_autocommit(stack):
    with engine_for(stack, pool_size=1) as engine:
        reading = UnitOfWork(engine, read_only=True)
        reading.conn.execute(text("SELECT 1"))
        reading.conn.connection.driver_connection.close()  # type: ignore[union-attr]  # e.g. the server dropped it
        reading.close()  # no error for the caller: the connection is discarded

        writing = UnitOfWork(engine)  # the pool's next connection is a fresh, transactional one
        assert writing.conn.execute(text("SELECT 1")).scalar_one() == 1
        assert _status(writing) == TransactionStatus.INTRANS
        writing.close()
