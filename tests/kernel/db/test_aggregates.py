"""The lock-the-root-first guard (kernel/data/aggregates.py), on violations planted here, on the stack's
PostgreSQL: it reads the SQL that reaches the driver, so it catches a violation however it is spelled
(Core, `text()`, a subquery string, a `Prepared` hot read), and lets the orders a serial write takes pass."""

from __future__ import annotations

import contextlib

import pytest
from persona_service.chat.repository import SESSION, ChatSessionRepository
from persona_service.kernel.data import aggregates
from persona_service.kernel.data.aggregates import LockGuard, LockOrderViolation
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.orgs.repository import EMAIL_SCOPE
from persona_service.personas.repository import PERSONA
from persona_service.webhooks.repository import ENDPOINT
from sqlalchemy import select, text
from support import engine_for

SESSION_ID = "chat_session_00000000000000000000000000"


@pytest.fixture()
def guarded(stack):
    with engine_for(stack, pool_size=2) as engine:
        LockGuard(aggregates.ORDER).install(engine)
        yield engine


@contextlib.contextmanager
def _writing(engine):
    """A writing unit of work's connection, closed (rolled back) at the block's end."""
    conn = UnitOfWork(engine).conn
    try:
        yield conn
    finally:
        conn.close()


PLANTED = {
    "a child read before its root is locked": "SELECT max(ordinal) FROM chat_messages WHERE session_id = 'x'",
    "a child written before its root": "UPDATE chat_messages SET content = '' WHERE session_id = 'x'",
    "the root read without a lock": "SELECT status FROM chat_sessions WHERE id = 'x'",
    "a schema-qualified child": "SELECT 1 FROM public.chat_messages",
    "a quoted child in a subquery string": 'SELECT (select count(*) FROM "chat_messages") AS n',
    "a child locked before its root": "SELECT id FROM chat_messages WHERE session_id = 'x' FOR UPDATE",
    "a delivery inserted before its endpoint is held": "INSERT INTO webhook_deliveries (id) VALUES ('d')",
    "a SCIM user's document read before it is locked": "SELECT document FROM scim_users WHERE id = 'x'",
    "a SCIM user held FOR KEY SHARE (its columns may change)": "SELECT id FROM scim_users WHERE id = 'x' FOR KEY SHARE",
}


@pytest.mark.parametrize("sql", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_violation_is_refused_before_it_reaches_postgresql(guarded, sql):
    with _writing(guarded) as conn:
        with pytest.raises(LockOrderViolation):
            conn.execute(text(sql))


def test_the_orders_a_serial_write_takes_pass(guarded):
    with _writing(guarded) as conn:
        conn.execute(text("SELECT 1 FROM webhook_endpoints WHERE id = 'e' FOR UPDATE"))
        conn.execute(text("SELECT count(*) FROM webhook_deliveries"))
        repo = ChatSessionRepository(conn)  # (declared after webhook endpoints: the lock order, below)
        assert repo.lock("ws_none", SESSION_ID) is None  # the root first (no such session: nothing is locked)
        repo.last_ordinal(SESSION_ID)  # then its messages


def test_a_shared_lock_on_the_root_holds_it_for_a_write_that_only_reads_it(guarded):
    with _writing(guarded) as conn:
        conn.execute(text("SELECT 1 FROM chat_sessions WHERE id = 'x' FOR SHARE"))
        conn.execute(text("SELECT count(*) FROM chat_messages WHERE session_id = 'x'"))
    with _writing(guarded) as conn:
        with pytest.raises(LockOrderViolation):  # KEY SHARE lets the row's columns change: it holds nothing
            conn.execute(text("SELECT 1 FROM chat_sessions WHERE id = 'x' FOR KEY SHARE"))


def test_an_atomic_update_of_the_root_holds_it(guarded):
    with _writing(guarded) as conn:
        conn.execute(text("UPDATE chat_sessions SET title = title WHERE id = 'x'"))
        conn.execute(text("SELECT count(*) FROM chat_messages WHERE session_id = 'x'"))


def test_each_transaction_locks_afresh(guarded):
    with _writing(guarded) as conn:
        ChatSessionRepository(conn).lock("ws_none", SESSION_ID)
        conn.commit()  # the lock went with the transaction
        with pytest.raises(LockOrderViolation):
            conn.execute(select(SESSION.members[0].c.id).limit(1))


def test_a_prepared_hot_read_of_the_root_in_a_write_is_checked_too(guarded):
    with _writing(guarded) as conn:
        with pytest.raises(LockOrderViolation):
            ChatSessionRepository(conn).get("ws_none", SESSION_ID)  # Prepared: past SQLAlchemy's events


def test_a_read_only_unit_of_work_decides_nothing_and_is_not_checked(guarded):
    reading = UnitOfWork(guarded, read_only=True)
    try:
        reading.conn.execute(text("SELECT count(*) FROM chat_messages"))
        ChatSessionRepository(reading.conn).get("ws_none", SESSION_ID)
    finally:
        reading.close()


def test_every_declared_aggregate_names_its_tables():
    assert SESSION in aggregates.ORDER and ENDPOINT in aggregates.ORDER
    assert ENDPOINT.tables == ("webhook_endpoints", "webhook_deliveries", "webhook_attempts")


def test_a_read_that_decides_nothing_says_so_and_passes(guarded):
    with _writing(guarded) as conn:
        stmt = text("SELECT count(*) FROM webhook_deliveries").execution_options(**{aggregates.DECIDES_NOTHING: True})
        conn.execute(stmt)


def test_a_connection_the_database_dropped_rolls_back_without_the_guard_failing(guarded, engine):
    with _writing(guarded) as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(Exception, match="terminat"):
            conn.execute(text("SELECT 1"))
        conn.rollback()  # the rollback event finds an invalidated connection: nothing to reset, no error


# The order between two aggregates' roots (docs/concurrency.md "The lock order"): two writes that took two roots in
# opposite orders would wait in a cycle; the guard refuses the second lock of the wrong order, as it is taken.
def test_a_root_locked_after_a_later_aggregates_root_is_refused(guarded):
    with _writing(guarded) as conn:
        aggregates.lock_root(conn, PERSONA, dict, PERSONA.root.c.id == "persona_x")  # persona: after chat_session
        with pytest.raises(LockOrderViolation, match="chat_session: its root locked after persona's"):
            ChatSessionRepository(conn).lock("ws_none", SESSION_ID)


def test_the_same_roots_in_the_declared_order_pass(guarded):
    with _writing(guarded) as conn:
        ChatSessionRepository(conn).lock("ws_none", SESSION_ID)
        conn.execute(text("SELECT 1 FROM personas WHERE id = 'x' FOR SHARE"))  # a persona a session is made of
        conn.execute(text("SELECT 1 FROM marketplace_listings WHERE id = 'x' FOR UPDATE"))
        conn.execute(text("SELECT 1 FROM chat_sessions WHERE id = 'y' FOR UPDATE"))  # only a first lock is ordered


def test_an_atomic_update_of_an_earlier_root_is_ordered_too(guarded):
    with _writing(guarded) as conn:
        conn.execute(text("SELECT 1 FROM portraits WHERE id = 'x' FOR UPDATE"))
        with pytest.raises(LockOrderViolation, match="persona: its root locked after portrait's"):
            conn.execute(text("UPDATE personas SET name = name WHERE id = 'x'"))


def test_a_new_roots_insert_takes_no_place_in_the_order(guarded):
    with _writing(guarded) as conn:  # a row nobody else sees: no one waits for it
        conn.execute(text("SELECT 1 FROM personas WHERE id = 'x' FOR SHARE"))
        conn.execute(text("INSERT INTO chat_sessions SELECT * FROM chat_sessions WHERE false"))
        conn.execute(text("SELECT count(*) FROM chat_messages WHERE session_id = 'x'"))  # its members: locked


def test_scim_roots_come_first_and_never_after_the_callers_hold(guarded):
    with _writing(guarded) as conn:  # the erasure's order: SCIM's group and user, then what it erases
        conn.execute(text("SELECT 1 FROM scim_groups WHERE id = 'x' FOR UPDATE"))
        conn.execute(text("SELECT 1 FROM scim_users WHERE id = 'x' FOR UPDATE"))
        conn.execute(text("UPDATE api_keys SET name = name WHERE id = 'x'"))
        conn.execute(text("DELETE FROM chat_sessions WHERE id = 'x'"))
    with _writing(guarded) as conn:
        conn.execute(text("SELECT 1 FROM scim_users WHERE id = 'x' FOR UPDATE"))
        with pytest.raises(LockOrderViolation, match="scim_group: its root locked after scim_user's"):
            conn.execute(text("SELECT 1 FROM scim_groups WHERE id = 'x' FOR UPDATE"))
    with _writing(guarded) as conn:
        with aggregates.holding(conn):
            conn.execute(text("SELECT 1"))  # (the caller's membership hold)
        with pytest.raises(LockOrderViolation, match="scim_user: its root locked after the caller's membership"):
            conn.execute(text("SELECT 1 FROM scim_users WHERE id = 'x' FOR UPDATE"))


def test_a_root_locked_after_a_lock_by_name_is_refused(guarded):
    named = "SELECT pg_advisory_xact_lock(hashtextextended('e-mail:a@example.com', 0))"
    with _writing(guarded) as conn:  # what has no row comes last: a root after it could wait in a cycle
        conn.execute(text(named))
        with pytest.raises(LockOrderViolation, match="persona: its root locked after a lock by name"):
            conn.execute(text("SELECT 1 FROM personas WHERE id = 'x' FOR SHARE"))
    with _writing(guarded) as conn:  # the declared order: roots, then by name; a new root's INSERT is no wait
        conn.execute(text("SELECT 1 FROM personas WHERE id = 'x' FOR UPDATE"))
        conn.execute(text(named))
        conn.execute(text("INSERT INTO chat_sessions SELECT * FROM chat_sessions WHERE false"))


def test_an_address_comes_right_after_the_scim_roots(guarded):
    lock = text("SELECT pg_advisory_xact_lock(hashtextextended(:scope, 0))")
    address = {"scope": EMAIL_SCOPE + "\x1fa@example.com"}
    with _writing(guarded) as conn:  # a SCIM user's PUT: its row, its address, then the keys a deactivation revokes
        conn.execute(text("SELECT 1 FROM scim_users WHERE id = 'x' FOR UPDATE"))
        conn.execute(lock, address)
        conn.execute(text("UPDATE api_keys SET name = name WHERE id = 'x'"))
    with _writing(guarded) as conn:  # the keys, then the address: a creation taking the address first waits in a cycle
        conn.execute(text("UPDATE api_keys SET name = name WHERE id = 'x'"))
        with pytest.raises(LockOrderViolation, match="'user email' taken after api_key"):
            conn.execute(lock, address)
    with _writing(guarded) as conn:  # any other lock by name is last
        conn.execute(lock, {"scope": "purchase\x1fl\x1fo"})
        with pytest.raises(LockOrderViolation, match="'user email' taken after a lock by name"):
            conn.execute(lock, address)


def test_the_lock_order_puts_scim_first_then_the_declaration_order():
    order = [a.name for a in LockGuard(aggregates.ORDER).order]
    assert order[:2] == ["scim_group", "scim_user"]
    assert order[2:] == [a.name for a in aggregates.ORDER if not a.before_members]
