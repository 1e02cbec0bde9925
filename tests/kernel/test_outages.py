"""Dependency outages: PostgreSQL or Redis down is 503 `service_unavailable`
with Retry-After (never a 500), and the service recovers by itself when the
dependency returns."""

from __future__ import annotations

import os
import pathlib
import shlex
import signal
import subprocess
import time

import pgserver
import pytest
from persona_service.kernel.auth import DEGRADED_TTL_SECONDS
from support import TenantFactory, assert_envelope, client_for, engine_for, make_stack, running

PG_CTL = pathlib.Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    if os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL"):
        pytest.skip("stops the embedded PostgreSQL and Redis")
    with running(make_stack(tmp_path_factory.mktemp("outages"), servers=2)) as stack:
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
    # As root, pgserver runs PostgreSQL as its own system user; pg_ctl must too.
    user = "pgserver" if os.geteuid() == 0 else None
    # Output to a file, never a pipe: the server inherits it and would hold pg_ctl's pipe open.
    pgdata = stack.settings.data_dir / "postgres"
    subprocess.run([str(PG_CTL), "-D", str(pgdata), "-w", "-l", str(pgdata / "log"), *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, user=user, cwd="/tmp")


def test_database_down_is_503_and_recovers_by_itself(own, own_tenant):
    pgdata = own.settings.data_dir / "postgres"
    # The exact options the embedded server was started with (socket dir, …).
    options = shlex.split((pgdata / "postmaster.opts").read_text())[1:]
    at = options.index("-D")
    del options[at:at + 2]
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
            _pg(own, "start", "-o", shlex.join(options))
        started = time.monotonic()
        while http.get(url, headers=own_tenant.auth).status_code != 200:
            assert time.monotonic() - started < 5, "not recovered within 5 s of PostgreSQL's return"
            time.sleep(0.05)


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
        os.kill(own._redis.pid, signal.SIGKILL)
        time.sleep(0.5)
        assert http.post(f"/v1/keys/{key_id}/revoke", headers=own_tenant.auth, json={}).status_code == 200
        time.sleep(DEGRADED_TTL_SECONDS + 0.5)
        statuses = {http.get(org, headers=doomed_auth).status_code for _ in range(20)}
        assert statuses == {401}
        for _ in range(60):  # served without limits
            assert http.get(org, headers=own_tenant.auth).status_code == 200
    time.sleep(3)
    for port in own.grpc_ports:
        log = (own.log_dir / f"server-{port}.log").read_text()
        assert log.count("invalidation bus down") == 1
        # Every call failed open, each a warning once: now at most one line per 10 s.
        assert 1 <= log.count("failing open") <= 2
        assert len(log) < 100_000
