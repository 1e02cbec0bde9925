"""Reads from a streaming replica where staleness is harmless (`MethodPolicy.read_may_lag`), with
read-your-writes for the caller's organization (docs/scaling-out.md "Reads from replicas").

- Read-your-writes: once a write of an organization commits, its unit of work reads the primary's WAL insert
  position and raises the organization's mark in Redis to it (kept while a replica in rotation may still lack
  it: the lag bound and a probe interval). A read that may lag opens on the replica only when the replica has
  replayed up to that mark (`pg_last_wal_replay_lsn()`, its first statement there, which also finds a pooled
  connection the replica dropped); else on the primary. Without a replica none of this runs: writes pay nothing.
- Rotation: at most once per probe interval a call samples the primary's position and the replica's replay
  position. The replica lags by the age of the oldest primary sample it has not replayed; past the bound, or
  unreachable, it is out of rotation (every such read on the primary) until a probe finds it caught up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis
from prometheus_client import Counter
from sqlalchemy import text

from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.logs import Throttled

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from persona_service.kernel.settings import Settings

log = logging.getLogger(__name__)
_warn = Throttled(log)

READS = Counter("persona_replica_reads_total", "Reads declared read_may_lag, by where they ran (replica, primary) "
                "and why (served; behind: the caller's last write not replayed; out: the replica out of "
                "rotation; down: it failed at the read)", ["target", "reason"])

MARK_PREFIX = "persona:replica:wrote:"  # + organization id: the WAL position its last write committed at
# Raise a mark, never lower it (writes of one organization commit on several processes at once).
_RAISE = """
local now = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > now then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
"""
# WAL positions as byte offsets (a pg_lsn minus its origin); Redis keeps them as Lua numbers, exact to 2^53 bytes.
PRIMARY_POSITION = text("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
REPLAY_POSITION = text("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint")
PENDING_SAMPLES = 256  # beyond, the two oldest merge (older time, newer position): lag is overstated, never under
CONNECT_TIMEOUT_SECONDS = 2  # a replica host gone silent costs a read this at most, once per probe interval


class ReplicaRouter:
    """Where a process's reads that may lag open, and the marks its writes leave."""

    def __init__(self, primary: Engine, replica: Engine, client: redis.Redis, max_lag: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.primary, self.replica, self.max_lag, self._clock = primary, replica, max_lag, clock
        self.probe_every = min(1.0, max_lag / 4)
        self._raise = client.register_script(_RAISE)
        self._redis = client
        self._mark_ms = int((max_lag + self.probe_every) * 1000) + 1000
        self._pending: deque[tuple[float, int]] = deque()  # (when, primary position) the replica had not replayed
        self._probe_lock = threading.Lock()
        self._probed_at = -float("inf")
        self._in_rotation = False
        # A write whose mark did not reach Redis: this process reads the primary until any replica has it.
        self._blind_until = -float("inf")

    # --- units of work --------------------------------------------------------------------------

    def routed(self, uow: UnitOfWork, write: bool, may_lag: bool, organization: str) -> UnitOfWork:
        """The call's unit of work once its caller is known, on the pool of `uow`: a write leaves its mark
        (taking over the connection authentication or limits may have opened), a read that may lag opens
        where `open_read` says unless it is open already; any other stays as it is."""
        engine = uow._engine  # noqa: SLF001 - this package's unit of work
        if write:
            marked = MarkedWrite(engine, self, organization)
            marked._conn, uow._conn = uow._conn, None  # noqa: SLF001
            return marked
        if may_lag and uow._conn is None:  # noqa: SLF001
            return LaggingRead(engine, self, organization)
        return uow

    def mark(self, conn: Connection, organization: str) -> None:
        """After a write committed on `conn`: the organization's reads need a replica that replayed this far.
        The call succeeded already: a failure here sends this process's lagging reads to the primary."""
        try:
            position = conn.execute(PRIMARY_POSITION).scalar_one()
            self._raise(keys=[MARK_PREFIX + organization], args=[position, self._mark_ms])
        except Exception as exc:  # noqa: BLE001 - committed; the primary then answers this process's reads
            self._blind_until = self._clock() + self._mark_ms / 1000
            _warn.log(logging.WARNING, "mark", "could not keep a write's WAL position (%s); reads that may lag "
                      "go to the primary meanwhile", type(exc).__name__)

    def open_read(self, primary: Engine, organization: str) -> Connection:
        """An autocommit connection for a read that may lag: on the replica when it is in rotation and has
        replayed the organization's last write, else on `primary`."""
        reason = "out" if self._clock() < self._blind_until or not self.in_rotation() else None
        if reason is None:
            conn, reason = self._replica_caught_up(organization)
            if conn is not None:
                READS.labels("replica", "served").inc()
                return conn
        READS.labels("primary", reason).inc()
        return _autocommit(primary.connect())

    # --- rotation -------------------------------------------------------------------------------

    def in_rotation(self) -> bool:
        """The last probe's verdict, probing again once it is older than the probe interval (one caller
        probes; the others take the verdict meanwhile, or the primary if it is older than the bound)."""
        now = self._clock()
        if now - self._probed_at < self.probe_every:
            return self._in_rotation
        if not self._probe_lock.acquire(blocking=False):
            return self._in_rotation and now - self._probed_at < self.max_lag
        try:
            self._in_rotation = self._probe(now)
            self._probed_at = now
        finally:
            self._probe_lock.release()
        return self._in_rotation

    def lag_seconds(self, now: float, replayed: int) -> float:
        """How long ago the primary was at a position the replica has not replayed (0: none pending)."""
        while self._pending and self._pending[0][1] <= replayed:
            self._pending.popleft()
        return now - self._pending[0][0] if self._pending else 0.0

    def _probe(self, now: float) -> bool:
        try:
            with self.primary.connect() as conn:
                position = conn.execute(PRIMARY_POSITION).scalar_one()
            with self.replica.connect() as conn:
                replayed = conn.execute(REPLAY_POSITION).scalar_one_or_none()
        except Exception as exc:  # noqa: BLE001 - down or unreachable: out of rotation until a probe reaches it
            self._lost(exc)
            return False
        if replayed is None:  # not in recovery (promoted, or not a replica at all): not this primary's copy
            _warn.log(logging.WARNING, "not-replica", "the replica is not replaying WAL; out of rotation")
            return False
        self._sample(now, position)
        lag = self.lag_seconds(now, replayed)
        if lag > self.max_lag:
            _warn.log(logging.WARNING, "lag", "the replica lags %.1fs (bound %.1fs); out of rotation", lag, self.max_lag)
        return lag <= self.max_lag

    def _sample(self, now: float, position: int) -> None:
        if not self._pending or self._pending[-1][1] < position:
            self._pending.append((now, position))
        if len(self._pending) > PENDING_SAMPLES:
            first, second = self._pending.popleft(), self._pending.popleft()
            self._pending.appendleft((first[0], second[1]))

    def _lost(self, exc: BaseException) -> None:
        """The replica failed: out of rotation, and its pooled connections dropped (the server that held
        them is gone); the next probe tries it afresh."""
        self._in_rotation = False
        self.replica.dispose(close=False)
        _warn.log(logging.WARNING, "down", "the replica is unreachable (%s); reads that may lag go to the primary",
                  type(exc).__name__)

    # --- one read -------------------------------------------------------------------------------

    def _replica_caught_up(self, organization: str) -> tuple[Connection | None, str]:
        """A replica connection when it replayed the organization's mark, else None and why not."""
        try:
            mark = int(self._redis.get(MARK_PREFIX + organization) or 0)
        except redis.RedisError:
            return None, "out"  # the marks are unknown: only the primary is sure to have every write
        conn = None
        try:
            conn = _autocommit(self.replica.connect())
            replayed = conn.execute(REPLAY_POSITION).scalar_one_or_none()
        except Exception as exc:  # noqa: BLE001 - stopped or restarted: this read goes to the primary
            if conn is not None:
                conn.invalidate()
                conn.close()
            self._probed_at = -float("inf")  # probe at the next read
            self._lost(exc)
            return None, "down"
        if replayed is not None and replayed >= mark:
            return conn, "served"
        _release(conn)
        return None, "behind"


class LaggingRead(UnitOfWork):
    """A read that may lag: its connection opens where the router says (the replica, or the primary)."""

    def __init__(self, engine: Engine, router: ReplicaRouter, organization: str) -> None:
        super().__init__(engine, read_only=True)
        self._router, self._organization = router, organization

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = self._router.open_read(self._engine, self._organization)
        return self._conn


class MarkedWrite(UnitOfWork):
    """A write whose commit leaves the organization's read-your-writes mark."""

    def __init__(self, engine: Engine, router: ReplicaRouter, organization: str) -> None:
        super().__init__(engine)
        self._router, self._organization = router, organization

    def commit(self) -> None:
        super().commit()
        if self._conn is not None:
            self._router.mark(self._conn, self._organization)


def replica_router(settings: Settings, primary: Engine, client: redis.Redis) -> ReplicaRouter | None:
    """The process's router, when a replica is configured (PERSONA_DATABASE_REPLICA_URL)."""
    if not settings.database_replica_url:
        return None
    replica = make_engine(settings.database_replica_url, pool_size=settings.db_pool_size,
                          prepared=settings.db_prepared_statements, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    return ReplicaRouter(primary, replica, client, settings.database_replica_max_lag_seconds)


def _autocommit(conn: Connection) -> Connection:
    conn.connection.driver_connection.autocommit = True  # type: ignore[union-attr]
    return conn


def _release(conn: Connection) -> None:
    """Back to the pool as the unit of work returns its connections (out of autocommit)."""
    conn.connection.driver_connection.autocommit = False  # type: ignore[union-attr]
    conn.close()
