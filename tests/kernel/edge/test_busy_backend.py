"""A busy server stays in rotation (mirrors server/persona_service/kernel/process/edge.py,
`_clusters`): Envoy health-checks each process on its stream port, so a probe
never queues behind unary calls. Before, a process whose unary threads were
all working failed its 0.5 s probe and every request got 503 `UH`."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from sqlalchemy import text
from support import make_stack_beside, running


@pytest.fixture(scope="module")
def one_thread(stack, tmp_path_factory):
    """One server process with a single unary thread, on the session's PostgreSQL and Redis."""
    busy = make_stack_beside(stack, tmp_path_factory.mktemp("busy"), PERSONA_GRPC_WORKERS="1")
    with running(busy):
        yield busy


def test_requests_queued_behind_a_slow_call_are_served_not_refused(one_thread, engine, tenants):
    t = tenants(plan="pro")
    with httpx.Client(base_url=one_thread.http_url, timeout=30) as client:
        assert client.get(f"/v1/orgs/{t.org_id}", headers=t.auth).status_code == 200  # credential cached

        statuses: list[int] = []

        def get() -> None:
            statuses.append(client.get(f"/v1/orgs/{t.org_id}", headers=t.auth).status_code)

        with engine.connect() as conn:
            # The only unary thread waits on this lock for 3 s (six health-check
            # intervals); the later calls arrive while it waits.
            conn.execute(text("LOCK TABLE organizations IN ACCESS EXCLUSIVE MODE"))
            callers = [threading.Thread(target=get) for _ in range(3)]
            callers[0].start()
            time.sleep(1.5)
            for caller in callers[1:]:
                caller.start()
            time.sleep(1.5)
            conn.rollback()
        for caller in callers:
            caller.join(30)
    assert statuses == [200, 200, 200]
