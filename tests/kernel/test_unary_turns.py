"""Unary admission per organization (issue #28): when every unary worker of
a server is busy, waiting calls get the workers in turns per organization
(kernel.transport.fair, weighted by plan), not first come first served, so one
organization's flood of in-limit calls does not queue ahead of everyone."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy import text
from support import calls_waiting_on_locks, engine_for, metric_value, wait_until

WORKERS = 8  # PERSONA_GRPC_WORKERS of the test stack (support.make_stack)


@contextlib.contextmanager
def _locked(engine, table: str):
    """No call reads `table` until the block ends."""
    with engine.connect() as conn, conn.begin():
        conn.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        yield


def _wait_for_blocked(engine, n: int) -> None:
    wait_until(lambda: calls_waiting_on_locks(engine) >= n, 30, f"{n} calls waiting on the lock")


def _wait_for_queued(stack, n: int, what: str) -> None:
    """Until `n` calls wait at the server's fair executor for a worker (its gauge, read beside the server)."""
    wait_until(lambda: metric_value(stack, "persona_unary_queued_calls") >= n, 30, what)


def test_a_quiet_organization_gets_the_next_free_worker_ahead_of_a_busy_ones_queue(stack, tenants):
    busy, quiet = tenants(plan="enterprise"), tenants(plan="pro")
    with engine_for(stack, pool_size=3) as engine, httpx.Client(base_url=stack.http_url, timeout=60, limits=httpx.Limits(max_connections=64)) as http, \
            ThreadPoolExecutor(2 * WORKERS + 1) as pool:
        for who, path in ((busy, "/v1/personas"), (busy, "/v1/webhooks"), (quiet, f"/v1/orgs/{quiet.org_id}")):
            assert http.get(path, headers=who.auth).status_code == 200  # credentials and limits cached
        with _locked(engine, "webhook_endpoints"):
            with _locked(engine, "personas"):
                # The busy organization holds every worker (its calls wait on a lock) and queues as many again.
                holding = [pool.submit(http.get, "/v1/personas", headers=busy.auth) for _ in range(WORKERS)]
                _wait_for_blocked(engine, WORKERS)
                queued = [pool.submit(http.get, "/v1/webhooks", headers=busy.auth) for _ in range(WORKERS)]
                _wait_for_queued(stack, WORKERS, "the busy organization's calls queued at the server first")
                quiet_call = pool.submit(http.get, f"/v1/orgs/{quiet.org_id}", headers=quiet.auth)
                # At the server's gate too before a worker comes free (CI once freed them before it arrived).
                _wait_for_queued(stack, WORKERS + 1, "the quiet call queued behind them")
            # Workers come free one by one; the quiet call gets one of them while the busy queue still waits.
            assert quiet_call.result(timeout=60).status_code == 200
            assert not all(f.done() for f in queued)
        assert [f.result(timeout=30).status_code for f in holding + queued] == [200] * (2 * WORKERS)

