"""Which database errors are the database's (kernel.data.outages): a write that reaches a server taking no
writes is one of them. During a failover a router may send a connection to the new leader before its
promotion ends (HAProxy on Patroni's /primary status alone did: docs/scaling-out.md, PostgreSQL failover);
the write then fails with read_only_sql_transaction, and the caller is answered 503 with Retry-After and
retries, where it used to be a 500. The service opens no read-only transactions of its own."""

from __future__ import annotations

import psycopg
import pytest
from persona_service.kernel.data.outages import connection_lost, must_run_again, unavailable
from sqlalchemy import exc as sa_exc


def _wrapped(orig: Exception) -> sa_exc.DBAPIError:
    """As SQLAlchemy raises it (psycopg's class 25 errors are InternalError)."""
    return sa_exc.DBAPIError.instance("INSERT INTO t VALUES (1)", {}, orig, psycopg.Error)


def test_a_write_on_a_standby_is_the_database_going_away():
    read_only = psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")
    wrapped = _wrapped(read_only)
    assert isinstance(wrapped, sa_exc.InternalError)
    assert connection_lost(wrapped) and unavailable(wrapped) and connection_lost(read_only)
    assert not must_run_again(wrapped)


@pytest.mark.parametrize("orig", [psycopg.errors.UniqueViolation("duplicate key"),
                                  psycopg.errors.InvalidTransactionState("other class 25 state"),
                                  psycopg.errors.InFailedSqlTransaction("aborted")])
def test_the_works_own_failures_stay_its_own(orig):
    assert not connection_lost(_wrapped(orig)) and not unavailable(_wrapped(orig))


def test_a_connection_out_of_step_with_its_server_is_one():
    """psycopg's own check, no SQLSTATE: seen once in the PostgreSQL failover topology, on a new connection's first
    ROLLBACK through PgBouncer after the primary's kill -9 (a 500 before, where the caller can retry)."""
    orig = psycopg.InternalError("received 2 results from command 'ROLLBACK'")
    assert orig.sqlstate is None and connection_lost(_wrapped(orig)) and unavailable(_wrapped(orig))


def test_a_server_shutting_down_is_still_one():
    assert connection_lost(_wrapped(psycopg.errors.AdminShutdown("terminating connection")))
