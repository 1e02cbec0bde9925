"""Durable runs through a database outage (kernel.runs, kernel.db.outages): a
run whose database connection drops mid-run (a PostgreSQL or PgBouncer
restart) is given back and taken over once the database answers again, from
its saved state, and its stream stays open meanwhile: every frame once, in
order, and one persona. A stream asked for while the database is down is a
503 with Retry-After before any frame (tests/kernel/test_outages.py covers
unary calls)."""

from __future__ import annotations

import time

from sqlalchemy import text
from support import personas_locked, sse_stream
from test_run_takeover import TIMEOUT, _check_one_run

# The run's own connection, as a restart drops it: it waits for the persona table's lock (support.personas_locked).
_DROP_WAITING = text("""
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
""")


def _drop_the_waiting_connection(engine) -> None:
    with engine.connect() as conn:
        for _ in range(200):
            if conn.execute(_DROP_WAITING).all():
                return
            conn.rollback()
            time.sleep(0.05)
    raise AssertionError("the run never waited for the persona table")


def test_a_run_whose_database_connection_drops_goes_on_once_it_is_back(http, engine, tenants):
    tenant = tenants(plan="pro")
    intent = "A lighthouse keeper who files storms alphabetically"
    with personas_locked(engine) as lock:
        with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                         headers=tenant.auth, timeout=TIMEOUT) as response:
            assert response.status_code == 200, response.read()
            events = sse_stream(response.iter_lines())
            seen = [next(events)]
            _drop_the_waiting_connection(engine)
            lock.rollback()
            seen += list(events)
    _check_one_run(http, engine, tenant, intent, response.headers["x-run-id"], [], seen)
