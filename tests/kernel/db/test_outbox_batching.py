"""A transaction's events are written in one INSERT as it commits (kernel.data.outbox_repository), in the
order emitted, and a savepoint rolled back takes the events emitted in it, as it took their rows."""

from __future__ import annotations

import contextlib

from persona_service.kernel.data import prepared
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.outbox import Outbox
from sqlalchemy import event, text


@contextlib.contextmanager
def inserts_into_events(engine):
    """The INSERTs into events: SQLAlchemy's, and the prepared ones (kernel.data.prepared) the flush runs."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, _params, _context, _many) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO EVENTS"):
            seen.append(statement)

    execute = prepared._execute

    def recorded(conn, sql, *args, **kwargs):
        if conn.engine is engine:
            record(conn, None, sql, None, None, False)
        return execute(conn, sql, *args, **kwargs)

    event.listen(engine, "before_cursor_execute", record)
    prepared._execute = recorded
    try:
        yield seen
    finally:
        prepared._execute = execute
        event.remove(engine, "before_cursor_execute", record)


def emit(conn, tenant, n: int) -> str:
    return Outbox(Work.on(conn)).emit("persona.updated", tenant.org_id, tenant.workspace_id, {"personaId": f"p{n}"})


def stored(engine, ids: list[str]) -> list[str]:
    """The events of `ids` that exist, in `seq` order."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id FROM events WHERE id = ANY(:ids) ORDER BY seq"), {"ids": ids})
        return [row.id for row in rows]


def test_a_transactions_events_are_one_insert_at_commit_in_the_order_emitted(engine, tenant):
    with inserts_into_events(engine) as inserts, engine.begin() as conn:
        conn.execute(text("SELECT 1"))
        made = [emit(conn, tenant, n) for n in range(3)]
        assert inserts == []  # held until the commit
        assert stored(engine, made) == []
    assert len(inserts) == 1
    assert stored(engine, made) == made


def test_a_rolled_back_transaction_writes_none(engine, tenant):
    with engine.connect() as conn:
        conn.begin()
        made = [emit(conn, tenant, n) for n in range(2)]
        conn.rollback()
        with conn.begin():  # the next transaction on the connection writes only its own
            after = emit(conn, tenant, 9)
    assert stored(engine, [*made, after]) == [after]


def test_a_savepoint_rolled_back_takes_its_events_and_one_released_keeps_them(engine, tenant):
    with engine.begin() as conn:
        first = emit(conn, tenant, 0)
        nested = conn.begin_nested()
        dropped = emit(conn, tenant, 1)
        nested.rollback()
        with conn.begin_nested():
            kept = emit(conn, tenant, 2)
            inner = conn.begin_nested()
            emit(conn, tenant, 3)
            inner.rollback()
        last = emit(conn, tenant, 4)
    assert stored(engine, [first, dropped, kept, last]) == [first, kept, last]


def test_events_written_before_a_savepoints_rollback_go_with_it(engine, tenant):
    """A flush inside a savepoint: the rows are the database's to roll back, and what came after them too."""
    with engine.begin() as conn:
        before = emit(conn, tenant, 0)
        nested = conn.begin_nested()
        flushed = emit(conn, tenant, 1)
        Outbox(Work.on(conn)).flush()
        held = emit(conn, tenant, 2)
        nested.rollback()
    assert stored(engine, [before, flushed, held]) == [before]


def test_an_event_outside_a_transaction_is_written_at_once(engine, tenant):
    with engine.connect() as conn:
        conn.connection.driver_connection.autocommit = True
        try:
            made = emit(conn, tenant, 0)
            assert stored(engine, [made]) == [made]
        finally:
            conn.connection.driver_connection.autocommit = False


def test_events_emitted_within_a_millisecond_list_in_the_order_emitted(engine, tenant):
    """GET /v1/events lists newest first and breaks ties of `occurred_at` by the (random) id: events one process
    emits in a burst get instants a millisecond apart, so the list is the order they were emitted in (the
    personas lifecycle test saw run.started and moderation.flagged swap when both fell in one millisecond)."""
    with engine.begin() as conn:
        made = [emit(conn, tenant, n) for n in range(20)]  # well within a few milliseconds
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id FROM events WHERE id = ANY(:ids) ORDER BY occurred_at, id"),
                            {"ids": made})
        assert [row.id for row in rows] == made


def test_the_event_clock_follows_a_clock_set_back():
    from datetime import UTC, datetime, timedelta

    from persona_service.kernel.transport.outbox import EventClock

    clock = EventClock()
    now = datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=UTC)
    first, second = clock.stamp(now), clock.stamp(now)
    assert (first.microsecond, second - first) == (123000, timedelta(milliseconds=1))
    assert clock.stamp(now - timedelta(days=1)) == (now - timedelta(days=1)).replace(microsecond=123000)
