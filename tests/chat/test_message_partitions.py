"""Chat messages age out (issue 49): `chat_messages` partitioned by month on its session's start
(migration 0035, the shared swap of kernel/data/partition_swap.py), kept by the module's job
`chat.partitions`. On a database holding the previous release's sessions and messages (alternatives and a
removed turn among them): the migration keeps every conversation (ids, ordinals, alternatives) and gives
each message its session's start; keyset pages by ordinal read one partition; the previous release's
inserts land in their session's partition; a session's messages, every alternative and edit, stay in
its month; (session, ordinal, swipe) stays unique; the job keeps everything by default and, with a
retention, drops a month of sessions whole, messages and sessions together, online (it gives way to chat
writers, and a round stopped between its steps is finished by the next; meanwhile the month's sessions
read empty and take no message); the downgrade gives every row back. Times are explicit: nothing waits
on a clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from alembic import command
from partition_db import (
    database_at,
    legacy_bound,
    month_of,
    own_server,
    partition_names,
    partition_of,
    while_a_writer_waits,
)
from persona_service.chat.module import MODULE
from persona_service.chat.records import NewMessage, NewSession
from persona_service.chat.repository import ChatSessionRepository
from persona_service.kernel.api import NotFound
from persona_service.kernel.data import migrate
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.partitions_repository import MonthlyPartitions, month_after
from persona_service.kernel.settings import forget
from persona_service.registry import MODULES
from plan_probe import relations_read
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError

BEFORE = "0034"  # the revision before the swap
ORG, WORKSPACE = "org_chat_partitions", "ws_chat_partitions"
NOW = datetime.now(UTC)
# Sessions the previous release started: months back, and two at one instant.
EXISTING = {f"chs_old_{n}": NOW - timedelta(days=days) for n, days in enumerate((70, 40, 40, 10, 0))}

_OLD_SESSION = text("""
    INSERT INTO chat_sessions (id, org_id, workspace_id, persona_id, user_id, title, status, message_count,
                               input_tokens, output_tokens, cost_usd_micros, started_at, last_active_at)
    VALUES (:id, :org, :ws, 'per_1', 'end-user', '', 'active', 0, 0, 0, 0, :at, :at)""")
# The previous release's message insert, as its repository ran it: no session_started_at.
_OLD_MESSAGE = text("""
    INSERT INTO chat_messages (id, session_id, org_id, workspace_id, ordinal, role, content, model, input_tokens,
                               output_tokens, cost_usd_micros, drift_score, recovered, created_at, swipe, selected,
                               deleted_at)
    VALUES (:id, :session, :org, :ws, :ordinal, :role, 'text', '', 0, 0, 0, 0, false, :at, :swipe, :selected,
            :deleted_at)""")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    return own_server(tmp_path_factory)


@pytest.fixture
def database(server_url, request) -> Iterator[tuple[str, Engine]]:
    """A database at the revision before the swap, holding the previous release's sessions, each with four
    turns: the second with two alternatives (the first unchosen), the fourth removed."""
    url, engine = database_at(server_url, "chat_" + request.node.name.removeprefix("test_"), BEFORE)
    with engine.begin() as conn:  # (sessions of no organization: what the messages need is the session row)
        conn.execute(text("SET LOCAL session_replication_role = replica"))
        for session_id, at in EXISTING.items():
            conn.execute(_OLD_SESSION, {"id": session_id, "org": ORG, "ws": WORKSPACE, "at": at})
    for session_id, at in EXISTING.items():
        with engine.begin() as conn:
            for ordinal, swipe, selected, removed in ((1, 0, True, False), (2, 0, False, False),
                                                      (2, 1, True, False), (3, 0, True, False), (4, 0, True, True)):
                old_message(conn, f"msg_{session_id}_{ordinal}_{swipe}", session_id, ordinal, at, swipe=swipe,
                            selected=selected, removed=removed)
    try:
        yield url, engine
    finally:
        engine.dispose()


def old_message(conn, message_id: str, session_id: str, ordinal: int, at: datetime, *, swipe: int = 0,
                selected: bool = True, removed: bool = False) -> None:
    conn.execute(_OLD_MESSAGE, {"id": message_id, "session": session_id, "org": ORG, "ws": WORKSPACE,
                                "ordinal": ordinal, "role": "user" if ordinal % 2 else "assistant",
                                "at": at + timedelta(seconds=ordinal), "swipe": swipe, "selected": selected,
                                "deleted_at": at if removed else None})


def stored(engine: Engine) -> dict[str, list[tuple[str, int, int, bool]]]:
    """Every session's messages as stored (removed ones and alternatives too), in order."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT session_id, id, ordinal, swipe, selected FROM chat_messages "
                                 "ORDER BY session_id, ordinal, swipe")).all()
    found: dict[str, list[tuple[str, int, int, bool]]] = {}
    for session_id, *message in rows:
        found.setdefault(session_id, []).append(tuple(message))  # type: ignore[arg-type]
    return found


def conversation(engine: Engine, session_id: str, limit: int) -> list[tuple[str, int, int, int]]:
    """A session's conversation as the API pages it (keyset by ordinal, `limit` a page): (id, ordinal,
    swipeIndex, swipeCount)."""
    found: list[tuple[str, int, int, int]] = []
    after = 0
    while True:
        with engine.connect() as conn:
            page = ChatSessionRepository(conn).messages_page(session_id, limit, after)
        found += [(m.id, m.ordinal, m.swipe_index, m.swipe_count) for m in page]
        if len(page) < limit:
            return found
        after = found[-1][1]


def new_session(engine: Engine, session_id: str, at: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL session_replication_role = replica"))  # (no organization, as above)
        ChatSessionRepository(conn).create(NewSession(session_id, ORG, WORKSPACE, "per_1", "end-user", "", at, at,
                                                      None))


def message(session_id: str, ordinal: int, at: datetime, suffix: str = "") -> NewMessage:
    return NewMessage(f"msg_{session_id}_{ordinal}{suffix}", session_id, ORG, WORKSPACE, ordinal,
                      "user" if ordinal % 2 else "assistant", f"turn {ordinal}", "session", at)


def session_starts(engine: Engine) -> dict[str, datetime]:
    """Each message's partition key, beside its session's start."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT m.id, m.session_started_at, s.started_at FROM chat_messages m "
                                 "JOIN chat_sessions s ON s.id = m.session_id")).all()
    assert all(key == start for _, key, start in rows), [r for r in rows if r[1] != r[2]]
    return {row_id: key for row_id, key, _ in rows}


def test_the_migration_keeps_every_conversation_and_a_page_reads_one_partition(database):
    url, engine = database
    before = stored(engine)
    migrate.upgrade(url, MODULES.migrations)
    assert stored(engine) == before  # the same ids, ordinals, alternatives, choices
    assert len(session_starts(engine)) == 5 * len(EXISTING)  # each message holds its session's start
    end = legacy_bound(engine, "chat_messages")
    assert end - NOW >= timedelta(days=2) and end.day == 1
    assert partition_names(engine, "chat_messages") == [
        "chat_messages_legacy", month_of("chat_messages", end), month_of("chat_messages", month_after(end))]
    for session_id in EXISTING:  # the removed turn left out, the chosen alternative of turn 2, two of them
        assert conversation(engine, session_id, 10) == [
            (f"msg_{session_id}_1_0", 1, 0, 1), (f"msg_{session_id}_2_1", 2, 1, 2), (f"msg_{session_id}_3_0", 3, 0, 1)]

    # the previous release's insert (no session_started_at) lands with its session's start
    with engine.begin() as conn:
        old_message(conn, "msg_old_after", "chs_old_0", 5, NOW)
    assert session_starts(engine)["msg_old_after"] == EXISTING["chs_old_0"]

    # sessions started in the months after the swap: their messages in their month, whatever their own date
    starts = {"chs_first": end, "chs_mid": end + timedelta(days=12), "chs_next": month_after(end) + timedelta(hours=1)}
    for session_id, at in starts.items():
        new_session(engine, session_id, at)
        for ordinal in (1, 2, 3, 4, 5):
            with engine.begin() as conn:
                ChatSessionRepository(conn).add_messages(message(session_id, ordinal, at + timedelta(days=40)))
    where = partition_of(engine, "chat_messages", "id")
    assert where["msg_chs_old_4_1_0"] == where["msg_old_after"] == "chat_messages_legacy"
    assert where["msg_chs_first_5"] == where["msg_chs_mid_1"] == month_of("chat_messages", end)
    assert where["msg_chs_next_5"] == month_of("chat_messages", month_after(end))

    for limit in (1, 2, 3):  # pages by ordinal: each message once, in order
        assert [m[1] for m in conversation(engine, "chs_next", limit)] == [1, 2, 3, 4, 5]
    with engine.connect() as conn:  # the page, the history and the turn's counts read the session's month alone
        repo = ChatSessionRepository(conn)
        for read in (lambda: repo.messages_page("chs_mid", 2, 1), lambda: repo.history_texts("chs_mid", 20),
                     lambda: repo.last_ordinal("chs_mid")):
            partitions = [{r for r in relations if r.startswith("chat_messages")}
                          for relations in relations_read(conn, read)]
            assert partitions == [{month_of("chat_messages", end)}]


def test_a_turns_alternatives_edits_and_removals_stay_in_their_sessions_month(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "chat_messages")
    started = end + timedelta(days=20)
    new_session(engine, "chs_turns", started)
    later = month_after(month_after(end)) + timedelta(days=3)  # the replies come months later
    with engine.begin() as conn:
        repo = ChatSessionRepository(conn)
        repo.add_messages(message("chs_turns", 1, later), message("chs_turns", 2, later))
        repo.add_alternative(message("chs_turns", 2, later, "_again"))
        chosen = repo.select_alternative("chs_turns", 2, 0)
        assert chosen is not None and chosen.id == "msg_chs_turns_2"
        repo.edit("chs_turns", "msg_chs_turns_1", "edited", later)
        repo.add_messages(message("chs_turns", 3, later))
        assert repo.remove_from("chs_turns", 3, later) == 1
    with engine.connect() as conn:  # an old session's turn, in the legacy partition
        turn = ChatSessionRepository(conn).message("chs_old_3", "msg_chs_old_3_2_0")
        assert turn is not None and turn.swipe_count == 2
    assert set(partition_of(engine, "chat_messages", "id")[m] for m in (
        "msg_chs_turns_1", "msg_chs_turns_2", "msg_chs_turns_2_again", "msg_chs_turns_3")) == {
        month_of("chat_messages", end)}
    assert [(m[0], m[2], m[3]) for m in conversation(engine, "chs_turns", 2)] == [
        ("msg_chs_turns_1", 0, 1), ("msg_chs_turns_2", 0, 2)]
    with engine.begin() as conn:  # an edit by message id reads its session's month alone, start known or not
        repo = ChatSessionRepository(conn)
        for lock_first in (False, True):
            if lock_first:  # (the service's: the session's row locked first, its start then a value)
                repo.lock(WORKSPACE, "chs_turns")
            partitions = [{r for r in relations if r.startswith("chat_messages_")} for relations in relations_read(
                conn, lambda: repo.edit("chs_turns", "msg_chs_turns_1", "edited", later))]
            assert partitions == [{month_of("chat_messages", end)}] * 2, lock_first
    with engine.begin() as conn, pytest.raises(IntegrityError):  # (session, ordinal, swipe) is still one message
        ChatSessionRepository(conn).add_messages(message("chs_turns", 1, later, "_twin"))
    with engine.begin() as conn, pytest.raises(IntegrityError):  # and a message's key is its session's start
        conn.execute(text("UPDATE chat_messages SET session_started_at = now() WHERE id = 'msg_chs_turns_1'"))


def _job(engine: Engine, now: datetime, days: int) -> int:
    """The module's job `chat.partitions` at `now`, PERSONA_CHAT_RETENTION_DAYS `days`."""
    job = next(j for j in MODULE.jobs if j.name == "chat.partitions")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PERSONA_CHAT_RETENTION_DAYS", str(days))
        forget()  # (settings are read once a process: read this one's)
        try:
            return job.run(SimpleNamespace(engine=engine, clock=lambda: now))  # type: ignore[arg-type]
        finally:
            forget()


def sessions(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(text("SELECT id FROM chat_sessions")).scalars())


def test_the_job_keeps_everything_by_default_and_drops_a_month_of_sessions_whole(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "chat_messages")
    new_session(engine, "chs_recent", end + timedelta(days=3))
    with engine.begin() as conn:
        ChatSessionRepository(conn).add_messages(message("chs_recent", 1, end + timedelta(days=3)))
    with engine.begin() as conn:  # an old session still in use: the last message today
        ChatSessionRepository(conn).add_messages(message("chs_old_4", 5, end + timedelta(days=29)))

    expired = end + timedelta(days=30)  # the legacy partition ended 30 days before
    assert _job(engine, expired, 0) >= 1  # kept forever: months made ahead, nothing dropped
    assert "chat_messages_legacy" in partition_names(engine, "chat_messages")
    assert len(sessions(engine)) == len(EXISTING) + 1
    assert _job(engine, expired, 0) == 0  # idempotent

    assert _job(engine, expired, 30) == 1  # the legacy partition, with every session started before `end`
    assert "chat_messages_legacy" not in partition_names(engine, "chat_messages")
    assert sessions(engine) == {"chs_recent"}  # the old session in use went whole: no session without messages
    assert list(stored(engine)) == ["chs_recent"]
    new_session(engine, "chs_after", expired)  # chat goes on after a drop
    with engine.begin() as conn:
        ChatSessionRepository(conn).add_messages(message("chs_after", 1, expired))
    assert [m[0] for m in conversation(engine, "chs_after", 5)] == ["msg_chs_after_1"]


def _exchange(session_id: str, ordinal: int, at: datetime) -> Callable[[Connection], None]:
    """A chat write as the service runs it: the session's row locked, then its message added."""
    def write(conn: Connection) -> None:
        repo = ChatSessionRepository(conn)
        assert repo.lock(WORKSPACE, session_id) is not None
        repo.add_messages(message(session_id, ordinal, at))
    return write


def test_a_retention_round_gives_way_to_chat_writers(database):
    """A round waiting for its locks behind a conversation's open write stops no other conversation: each of
    its steps waits at most LOCK_WAIT_MS, then gives way (the previous job, one transaction, queued every
    chat write behind its DROP for up to 5 s, and then held them while it deleted the month's sessions)."""
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "chat_messages")
    for session_id in ("chs_open", "chs_other"):
        new_session(engine, session_id, end + timedelta(days=2))
    expired = end + timedelta(days=30)
    seen = while_a_writer_waits(url, lambda: _job(engine, expired, 30), _exchange("chs_open", 1, expired),
                                _exchange("chs_other", 1, expired))
    assert seen.writer_error is None, seen.writer_error
    assert seen.job_error is None and isinstance(seen.job, int) and seen.job >= 1, seen
    assert "chat_messages_legacy" not in partition_names(engine, "chat_messages")
    assert sessions(engine) == {"chs_open", "chs_other"}  # the old ones went, the two writes stayed
    assert {s: [m[0] for m in found] for s, found in stored(engine).items()} == {
        "chs_open": ["msg_chs_open_1"], "chs_other": ["msg_chs_other_1"]}


def test_a_month_being_retired_reads_empty_takes_no_message_and_a_stopped_round_is_finished(database):
    """The states a round can stop in, each finished by the next round: the partition pending detach (its
    second step stopped: here by a reader it waited on past the lock timeout), then detached but not dropped
    and its sessions not deleted. Meanwhile an old session reads with no messages and a message to it is 404."""
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "chat_messages")
    expired = end + timedelta(days=30)
    _job(engine, expired, 0)  # (the months ahead made: nothing to do but the retirement below)
    own = make_engine(url, pool_size=2)
    try:
        with own.connect() as reader, own.connect().execution_options(isolation_level="AUTOCOMMIT") as ddl:
            reader.begin()
            reader.execute(text("SELECT count(*) FROM chat_messages"))
            ddl.execute(text("COMMENT ON TABLE chat_messages_legacy IS 'retired from chat_messages'"))
            ddl.execute(text("SET lock_timeout = '100ms'"))
            with pytest.raises(OperationalError):
                ddl.execute(text("ALTER TABLE chat_messages DETACH PARTITION chat_messages_legacy CONCURRENTLY"))
            reader.rollback()
            assert ddl.execute(text("SELECT inhdetachpending FROM pg_inherits "
                                    "WHERE inhrelid = CAST('chat_messages_legacy' AS regclass)")).scalar_one()
            ddl.execute(text("RESET lock_timeout"))
            MonthlyPartitions(ddl, "chat_messages").retire("chat_messages_legacy")  # FINALIZE; not dropped yet
            assert ddl.execute(text("SELECT to_regclass('chat_messages_legacy') IS NOT NULL")).scalar_one()
    finally:
        own.dispose()
    assert "chat_messages_legacy" not in partition_names(engine, "chat_messages")
    assert sessions(engine) == set(EXISTING)  # not deleted yet: they read with no messages
    assert conversation(engine, "chs_old_4", 10) == []
    with engine.begin() as conn, pytest.raises(NotFound):
        _exchange("chs_old_4", 5, expired)(conn)

    # the next round: nothing left to detach; the detached one dropped, the sessions deleted, the one a write
    # holds meanwhile too (skipped by its batch, then waited for by the round's last pass)
    round_ = ThreadPoolExecutor(1)
    own = make_engine(url, pool_size=1)
    try:
        with own.begin() as holder:
            assert ChatSessionRepository(holder).lock(WORKSPACE, "chs_old_2") is not None
            done = round_.submit(_job, engine, expired, 30)
            while not done.done() and not _waiting_delete(url):
                time.sleep(0.02)
        assert done.result(timeout=60) == 0
    finally:
        own.dispose()
        round_.shutdown()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT to_regclass('chat_messages_legacy') IS NULL")).scalar_one()
    assert sessions(engine) == set() and stored(engine) == {}


def test_the_retentions_batches_go_by_id_and_leave_a_session_in_use_to_the_last_pass(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    before = legacy_bound(engine, "chat_messages")
    batches: list[list[str]] = []
    own = make_engine(url, pool_size=1)
    try:
        with own.begin() as holder:  # a write holds one of them
            assert ChatSessionRepository(holder).lock(WORKSPACE, "chs_old_1") is not None
            after = ""
            while gone := _expire_batch(engine, before, after):
                batches.append(gone)
                after = gone[-1]
    finally:
        own.dispose()
    assert batches == [["chs_old_0", "chs_old_2"], ["chs_old_3", "chs_old_4"]]
    assert sessions(engine) == {"chs_old_1"}
    assert _expire_batch(engine, before, "") == ["chs_old_1"]  # the round's last pass (it waits for the write)


def _expire_batch(engine: Engine, before: datetime, after: str) -> list[str]:
    with engine.begin() as conn:
        return ChatSessionRepository(conn).expire(before, after, limit=2)


def _waiting_delete(url: str) -> bool:
    watch = make_engine(url, pool_size=1)
    try:
        with watch.connect() as conn:
            return bool(conn.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE 'DELETE FROM chat_sessions%'")).scalar_one())
    finally:
        watch.dispose()


def test_a_sessions_delete_takes_its_messages(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    with engine.begin() as conn:
        assert ChatSessionRepository(conn).erase(ORG, ["end-user"]) == {"chat_sessions_deleted": len(EXISTING)}
        assert conn.execute(text("SELECT count(*) FROM chat_messages")).scalar_one() == 0


def test_the_downgrade_gives_every_row_back(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    start = legacy_bound(engine, "chat_messages") + timedelta(days=1)
    new_session(engine, "chs_month", start)
    with engine.begin() as conn:
        ChatSessionRepository(conn).add_messages(message("chs_month", 1, start))
    before = stored(engine)
    command.downgrade(migrate.alembic_config(url, MODULES.migrations), BEFORE)
    assert stored(engine) == before
    assert partition_names(engine, "chat_messages") == []
    with engine.begin() as conn:  # the previous release's insert, on the table as it was
        old_message(conn, "msg_downgraded", "chs_month", 2, start)
        conn.execute(text("DELETE FROM chat_sessions WHERE id = 'chs_month'"))  # the key cascades again
    assert "chs_month" not in stored(engine)
    migrate.upgrade(url, MODULES.migrations)  # and up again
    assert stored(engine) == {k: v for k, v in before.items() if k != "chs_month"}
