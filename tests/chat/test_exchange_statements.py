"""What an exchange costs the database (chat/service.py `record_exchange`):
its two messages are stored in one statement, one round trip, in order, prepared (no SQLAlchemy layers); the
history a send reads is prepared too; the session's lock, every write's first statement after the caller's hold,
runs prepared and still locks the row."""

from __future__ import annotations

import pytest
from persona_service.chat.repository import ChatSessionRepository
from persona_service.chat.service import ChatSessionService, Reply
from persona_service.kernel.data import prepared
from persona_service.kernel.data.work import Work
from persona_service.kernel.models import Message
from persona_service.kernel.principal import Principal
from persona_service.providers.pricing import PriceTable
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError


def test_an_exchange_stores_its_two_messages_in_one_statement(http, engine, tenant, monkeypatch):
    persona = http.post("/v1/personas", json={"intent": "A ferry captain who hums sea shanties"}, headers=tenant.auth)
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth).json()
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(), "owner",
                          tenant.plan, False)
    statements: list[str] = []
    run = prepared._execute
    ran: list[str] = []  # what ran past SQLAlchemy
    monkeypatch.setattr(prepared, "_execute", lambda conn, sql, *args, **kw: ran.append(sql) or run(conn, sql, *args, **kw))
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        exchange = ChatSessionService(Work.on(conn), prices=PriceTable.from_env()).record_exchange(
            principal, session["sessionId"], Message("user", "Ahoy?"), Reply("Ahoy!", "stub", 3, 2, "stop"))
        monkeypatch.setattr(prepared, "_execute", run)
        stored = ChatSessionRepository(conn).messages_page(session["sessionId"], 10, 0)
        conn.rollback()
    # One statement accounts the exchange and inserts both messages (a CTE), then the persona is held: two round
    # trips, where the accounting, the hold and the insert were three.
    assert len(ran) == 2 and "UPDATE chat_sessions" in ran[0] and "INSERT INTO chat_messages" in ran[0]
    assert "FOR SHARE" in ran[1] and "personas" in ran[1]
    # The accounting is a prepared UPDATE … RETURNING and the two messages one prepared INSERT … RETURNING
    # (issue 50), past SQLAlchemy (Core wrote one INSERT of both before), with the same counters and rows.
    assert not [s for s in statements if s.lstrip().upper().startswith(("UPDATE CHAT_SESSIONS",
                                                                          "INSERT INTO CHAT_MESSAGES"))]
    assert (exchange.session.message_count, exchange.session.input_tokens, exchange.session.output_tokens) == (
        session["messageCount"] + 2, 3, 2)
    assert exchange.session.last_active_at >= exchange.reply.created_at
    assert (exchange.user_message.role, exchange.reply.role) == ("user", "assistant")
    assert (exchange.user_message.content, exchange.reply.content) == ("Ahoy?", "Ahoy!")
    assert exchange.reply.ordinal == exchange.user_message.ordinal + 1
    assert (exchange.reply.model, exchange.reply.input_tokens, exchange.reply.swipe_count) == ("stub", 3, 1)
    assert stored[-2:] == [exchange.user_message, exchange.reply]  # the records as a read gives them back


def test_a_sends_history_is_prepared_and_reads_what_core_reads(http, engine, tenant):
    persona = http.post("/v1/personas", json={"intent": "A ferry captain who hums sea shanties"}, headers=tenant.auth)
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth).json()
    for text_ in ("First?", "Second?", "Third?"):
        assert http.post(f"/v1/chat/sessions/{session['sessionId']}/messages", json={"content": text_},
                         headers=tenant.auth).status_code == 200
    statements: list[str] = []
    with engine.connect() as conn:
        core = ChatSessionRepository(conn)  # no session row read: the start is read by the statement (Core)
        expected = [core.history_texts(session["sessionId"], n, before) for n, before in ((50, None), (3, None),
                                                                                          (50, 4), (2, 5))]
        repo = ChatSessionRepository(conn)
        repo.lock(tenant.workspace_id, session["sessionId"])  # as a send does first: its start known
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        prepared = [repo.history_texts(session["sessionId"], n, before) for n, before in ((50, None), (3, None),
                                                                                          (50, 4), (2, 5))]
        conn.rollback()
    assert statements == []  # none went through SQLAlchemy
    assert prepared == expected
    assert len(expected[0]) == 6 and expected[0][0] == ("user", "First?") and expected[0][-1][0] == "assistant"
    assert [len(h) for h in expected[1:]] == [3, 3, 2]


def test_the_session_lock_is_prepared_and_locks_the_row(http, engine, tenant):
    persona = http.post("/v1/personas", json={"intent": "A ferry captain who hums sea shanties"}, headers=tenant.auth)
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth).json()
    statements: list[str] = []
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        repo = ChatSessionRepository(conn)
        locked = repo.lock(tenant.workspace_id, session["sessionId"])
        assert statements == []  # none went through SQLAlchemy
        assert locked is not None and locked == repo.get(tenant.workspace_id, session["sessionId"])
        with engine.connect() as other, pytest.raises(OperationalError):
            other.execute(text("SELECT 1 FROM chat_sessions WHERE id = :id FOR UPDATE NOWAIT"),
                          {"id": session["sessionId"]})
        assert repo.lock("another-workspace", session["sessionId"]) is None
        conn.rollback()
