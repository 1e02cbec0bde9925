"""Which database errors are the database's, not the work's: the one place
that classifies them (callers get 503 for these, kernel.transport.outages;
a durable run is retried after the narrower `connection_lost`, kernel.transport.runs)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLSTATEs of a server (or PgBouncer) going away: class 08 (connection exception; PgBouncer's own errors, such
# as "server conn crashed?", are 08P01), the server shutting down (admin or crash) or still starting, and its
# connection slots full.
_GONE_CLASSES = ("08",)
_GONE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})
# A server that takes no writes (25006, read_only_sql_transaction): a hot standby, reached while a failover
# is under way (a router that sent the connection to the new leader before its promotion ended). The service
# opens no read-only transactions itself, so this is where the database is, not what the work did.
_READ_ONLY_STATE = "25006"


def connection_lost(exc: BaseException) -> bool:
    """The database could not be reached, dropped the connection mid-work (a
    PostgreSQL or PgBouncer restart, a failover) or is a standby that takes no
    writes (a failover under way): the work's open transaction did not commit,
    and the same work can succeed once the database is back; unless what failed
    was its COMMIT, which may have gone through unanswered (in doubt: a run's
    acceptance is settled from its row, kernel.transport.runs). False for the
    work's own failures (a constraint, a timeout, a bug)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, sa_exc.InterfaceError | sa_exc.TimeoutError):  # a closed connection; no free one in time
        return True
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    if isinstance(orig, psycopg.InterfaceError):
        return True
    if isinstance(orig, psycopg.Error) and orig.sqlstate == _READ_ONLY_STATE:
        return True
    if type(orig) is psycopg.InternalError and orig.sqlstate is None:
        # The client's own protocol check, no server error: "received 2 results from command 'ROLLBACK'" from a
        # connection PgBouncer handed over while its server went away in a failover (the topology test's kill -9
        # of the primary, as a new connection's first ROLLBACK). The connection is unusable; a new one works.
        return True
    if not isinstance(orig, psycopg.OperationalError):
        return False
    state = orig.sqlstate
    # No SQLSTATE: the client's own failure to connect or to read (the server closed the connection).
    return state is None or state.startswith(_GONE_CLASSES) or state in _GONE_STATES


def read_when_back(engine: Engine, read: Callable[[Connection], T], seconds: float) -> tuple[bool, T | None]:
    """`read` on a new connection once the database answers again (a restart, a failover), waiting out lost
    connections for up to `seconds`: (True, what it read), or (False, None) when the database did not answer in
    time or the read failed otherwise. How a COMMIT in doubt (its connection dropped before the answer) is
    settled: by reading back what only that transaction wrote (a run's row, an Idempotency-Key's outcome)."""
    deadline, delay = time.monotonic() + seconds, 0.1
    while True:
        try:
            with engine.connect() as conn:
                return True, read(conn)
        except Exception as exc:  # noqa: BLE001 - classified: only a lost connection is waited out
            if not connection_lost(exc) or time.monotonic() + delay > deadline:
                log.warning("the database did not answer a read-back (%s)", type(exc).__name__)
                return False, None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


# A transaction's fate by its id, as PostgreSQL keeps it (13+): 'committed', 'aborted', 'in progress', or NULL when
# it is too old to know. Written for this: a client whose COMMIT went unanswered asks, on a new connection.
_XACT_STATUS = text("SELECT pg_xact_status(CAST(:xid AS xid8))")
# How often a transaction still 'in progress' is asked again (its backend finishing the COMMIT it was sent).
_IN_PROGRESS_PAUSE = 0.1


def committed(engine: Engine, xid: int, seconds: float) -> bool:
    """Whether transaction `xid` (`UnitOfWork.transaction_id`, read before its COMMIT) committed, once the database
    answers within `seconds`: how a COMMIT in doubt is settled when nothing the transaction wrote identifies it
    (a write without an Idempotency-Key). False when it aborted, when the database did not answer in time, or
    when it cannot say (a failover to a standby that never saw the transaction: there it did not commit)."""
    deadline = time.monotonic() + seconds
    while True:
        answered, status = read_when_back(engine, lambda conn: conn.execute(_XACT_STATUS, {"xid": str(xid)}).scalar(),
                                          max(deadline - time.monotonic(), 0.0))
        if not answered or status != "in progress" or time.monotonic() + _IN_PROGRESS_PAUSE > deadline:
            return answered and status == "committed"
        time.sleep(_IN_PROGRESS_PAUSE)


# SQLSTATEs of a transaction PostgreSQL chose to abort so that others could go on: a deadlock it broke, a
# serializable (or repeatable read) snapshot that could not be kept. Nothing of the transaction committed,
# and the same work run again, after the other transaction, is what one serial order gives.
_RETRIABLE_STATES = frozenset({"40P01", "40001"})


def must_run_again(exc: BaseException) -> bool:
    """PostgreSQL aborted the work's transaction to break a deadlock or keep
    a snapshot serial: running the same work again is the serial answer
    (the caller never sees these; kernel.transport.stages.commit)."""
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    return isinstance(orig, psycopg.Error) and orig.sqlstate in _RETRIABLE_STATES


def unavailable(exc: BaseException) -> bool:
    """The database failed the work, not the work itself: a lost connection, or
    the server refusing it for now (an `OperationalError`: a lock or statement
    timeout, a deadlock); a caller may retry shortly (503)."""
    return connection_lost(exc) or isinstance(exc, sa_exc.OperationalError)
