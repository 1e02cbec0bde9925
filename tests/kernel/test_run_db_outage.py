"""Durable runs through a database outage (kernel.transport.runs, kernel.data.outages): a
run whose database connection drops mid-run (a PostgreSQL or PgBouncer
restart) is given back and taken over once the database answers again, from
its saved state, and its stream stays open meanwhile: every frame once, in
order, and one persona. A stream asked for while the database is down is a
503 with Retry-After before any frame (tests/kernel/test_outages.py covers
unary calls)."""

from __future__ import annotations

import time

from sqlalchemy import text
from support import assert_envelope, personas_locked, sse_stream
from test_run_takeover import TIMEOUT, _check_one_run

# The run's connections, as a restart drops them: the one waiting for the test's lock and, with `idle`, its unit
# of work's too (open, idle in its transaction, while the run saves a step on another connection).
_DROP = text("""
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> :holder
  AND (wait_event_type = 'Lock' OR (CAST(:idle AS boolean) AND state = 'idle in transaction'))
""")


def _drop_the_run_connections(engine, holder: int, idle: bool = False) -> None:
    """Once the run waits for the lock `holder` (a backend pid) holds."""
    with engine.connect() as conn:
        for _ in range(200):
            if conn.execute(_DROP, {"holder": holder, "idle": idle}).all():
                return
            conn.rollback()
            time.sleep(0.05)
    raise AssertionError("the run never waited for the lock")


def _pid(conn) -> int:
    return conn.execute(text("SELECT pg_backend_pid()")).scalar()


def test_a_run_whose_database_connection_drops_goes_on_once_it_is_back(http, engine, tenants):
    tenant = tenants(plan="enterprise")  # the plan that may set its own quota
    quota = http.put("/v1/config/api.rate_limit.generations_per_month", headers=tenant.auth,
                       json={"value": 1, "level": "org"})
    assert quota.status_code == 200, quota.text
    intent = "A lighthouse keeper who files storms alphabetically"
    with personas_locked(engine) as lock:
        with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                         headers=tenant.auth, timeout=TIMEOUT) as response:
            assert response.status_code == 200, response.read()
            events = sse_stream(response.iter_lines())
            seen = [next(events)]
            _drop_the_run_connections(engine, _pid(lock.connection))
            lock.rollback()
            seen += list(events)
    _check_one_run(http, engine, tenant, intent, response.headers["x-run-id"], [], seen)
    # The attempt that gave the run back did not refund its quota unit: the run completed, once, charged once.
    assert_envelope(http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"}),
                    429, "quota_exceeded")


def test_a_run_whose_connections_all_drop_goes_on_once_the_database_is_back(http, engine, tenants):
    """As behind PgBouncer: the save of a step fails, and the unit of work's connection, dropped too, is found
    dead only by its rollback (kernel.data.uow), which must not end the run."""
    tenant = tenants(plan="pro")
    intent = "A beekeeper who counts in thunderclaps"
    with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                     headers=tenant.auth, timeout=TIMEOUT) as response:
        assert response.status_code == 200, response.read()
        events = sse_stream(response.iter_lines())
        seen = [next(events)]
        with engine.connect() as lock:  # the run's next save (or its commit) waits for its row
            lock.execute(text("SELECT 1 FROM tasks WHERE id = :id FOR UPDATE"), {"id": response.headers["x-run-id"]})
            _drop_the_run_connections(engine, _pid(lock), idle=True)
            lock.rollback()
        seen += list(events)
    _check_one_run(http, engine, tenant, intent, response.headers["x-run-id"], [], seen)
