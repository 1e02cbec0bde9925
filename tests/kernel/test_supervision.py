"""Supervision: a dead server or worker is replaced, Envoy routes around a
dead backend at once, and `up` leaves nothing behind however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from persona_service.kernel.process.stack import free_port
from support import JWT_SECRET, client_for, make_stack_beside, running, seed_postgres
from test_cli import CLI, ROOT, cli_env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait(predicate, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.1)
    pytest.fail(f"not within {timeout}s: {what}")


@pytest.fixture(scope="module")
def pair(stack, tmp_path_factory):
    """Processes of their own, two servers among them (this module kills them), on the session's PostgreSQL and Redis."""
    with running(make_stack_beside(stack, tmp_path_factory.mktemp("supervised"), servers=2)) as two:
        yield two


@pytest.fixture(scope="module")
def pair_tenant(tenants):
    return tenants(plan="team")


def test_a_killed_server_costs_no_request_and_is_replaced(pair, pair_tenant):
    port = pair.grpc_ports[0]
    victim = pair.process(f"server-{port}")
    assert victim is not None
    with client_for(pair) as http:
        url = f"/v1/orgs/{pair_tenant.org_id}"
        assert http.get(url, headers=pair_tenant.auth).status_code == 200
        os.kill(victim.pid, signal.SIGKILL)
        statuses = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            statuses.append(http.get(url, headers=pair_tenant.auth).status_code)
        assert statuses and set(statuses) == {200}, statuses
        _wait(lambda: pair.restarts(f"server-{port}") >= 1, 15, "the server was restarted")
        replacement = pair.process(f"server-{port}")
        assert replacement is not None and replacement.pid != victim.pid
        # Both backends serve again: keep asking until the new one has answered.
        _wait(lambda: replacement.poll() is None and http.get(url, headers=pair_tenant.auth).status_code == 200,
              10, "requests succeed with the replacement")


def test_a_killed_worker_is_replaced(pair):
    victim = pair.process("webhook-worker-0")
    assert victim is not None
    os.kill(victim.pid, signal.SIGKILL)
    _wait(lambda: pair.restarts("webhook-worker-0") >= 1, 15, "the worker was restarted")
    replacement = pair.process("webhook-worker-0")
    assert replacement is not None and replacement.pid != victim.pid and replacement.poll() is None


# --- `up` as users run it ----------------------------------------------------------


def _up(stack, data_dir, http_port: int | None = None):
    ports = {"PERSONA_HTTP_PORT": str(http_port or free_port()), "PERSONA_GRPC_PORT": str(free_port(1000))}
    # No drain on stop (nothing routes to these servers but the tests' own calls, answered before they stop).
    env = cli_env(PERSONA_DATA_DIR=str(data_dir), PERSONA_JWT_SECRET=JWT_SECRET, PERSONA_SERVER_PROCESSES="1",
                  PERSONA_DRAIN_SECONDS="0", **ports)
    proc = subprocess.Popen([str(CLI), "up"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "is up in" in line:
            return proc, int(ports["PERSONA_HTTP_PORT"])
    pytest.fail(f"`up` did not start (exit {proc.wait()})")


def _everything_up_started(data_dir) -> list[int]:
    state = json.loads((data_dir / "stack-pids.json").read_text())
    pids = list(state["pids"])
    pids.append(int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0]))
    return pids


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGHUP])
def test_up_leaves_no_orphans(stack, tmp_path, how):
    data_dir = tmp_path / "data"
    if how == signal.SIGHUP:  # (after SIGKILL, `up` has created and migrated its PostgreSQL itself)
        seed_postgres(data_dir)
    proc, _ = _up(stack, data_dir)
    pids = _everything_up_started(data_dir)
    assert len(pids) >= 5  # server, worker, envoy, redis, postgres
    assert all(_alive(p) for p in pids)
    proc.send_signal(how)
    proc.wait(30)
    _wait(lambda: not any(_alive(p) for p in pids), 20, f"every process `up` started is gone after {how.name}")


def test_up_restarts_on_the_same_ports_right_after_a_stop(stack, tmp_path):
    data_dir = tmp_path / "data"
    seed_postgres(data_dir)
    proc, http_port = _up(stack, data_dir)
    import httpx

    for _ in range(20):  # leave connections (and TIME-WAIT sockets) behind
        httpx.get(f"http://127.0.0.1:{http_port}/v1/orgs/x")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    again, _ = _up(stack, data_dir, http_port=http_port)
    again.send_signal(signal.SIGTERM)
    assert again.wait(30) == 0
