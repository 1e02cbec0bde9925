"""A busy server stays in rotation (mirrors server/persona_service/process/edge.py,
`_clusters`): Envoy health-checks each process on its stream port, so a probe
never queues behind unary calls. Before, a process whose unary threads were
all working failed its 0.5 s probe and every request got 503 `UH`."""

from __future__ import annotations

import threading

import httpx
import pytest
from persona_service.process.edge import UNARY_CLUSTER
from sqlalchemy import text
from support import calls_waiting_on_locks, make_stack_beside, metric_value, running, wait_until


@pytest.fixture(scope="module")
def one_thread(stack, tmp_path_factory):
    """One server process with a single unary thread, on the session's PostgreSQL and Redis."""
    busy = make_stack_beside(stack, tmp_path_factory.mktemp("busy"), PERSONA_GRPC_WORKERS="1")
    with running(busy):
        yield busy


def _health_checks(stack) -> int:
    """Envoy's health checks of the unary cluster so far."""
    status, body = stack.envoy_admin(f"/stats?filter=^cluster\\.{UNARY_CLUSTER}\\.health_check\\.attempt$")
    assert status == 200, body
    return int(body.decode().rpartition(":")[2])


def test_requests_queued_behind_a_slow_call_are_served_not_refused(one_thread, engine, tenants):
    t = tenants(plan="pro")
    with httpx.Client(base_url=one_thread.http_url, timeout=30) as client:
        assert client.get(f"/v1/orgs/{t.org_id}", headers=t.auth).status_code == 200  # credential cached

        statuses: list[int] = []

        def get() -> None:
            statuses.append(client.get(f"/v1/orgs/{t.org_id}", headers=t.auth).status_code)

        with engine.connect() as conn:
            # The only unary thread waits on this lock; the later calls queue for it meanwhile, and the lock is
            # held over six of Envoy's health checks of the process (each would have queued behind them too).
            conn.execute(text("LOCK TABLE organizations IN ACCESS EXCLUSIVE MODE"))
            callers = [threading.Thread(target=get) for _ in range(3)]
            callers[0].start()
            wait_until(lambda: calls_waiting_on_locks(engine) >= 1, 30, "the first call waiting on the lock")
            for caller in callers[1:]:
                caller.start()
            wait_until(lambda: metric_value(one_thread, "persona_unary_queued_calls") >= 2, 30,
                       "the later calls queued for the busy thread")
            checked = _health_checks(one_thread)
            wait_until(lambda: _health_checks(one_thread) >= checked + 6, 60, "six health checks while it is busy")
            conn.rollback()
        for caller in callers:
            caller.join(30)
    assert statuses == [200, 200, 200]
