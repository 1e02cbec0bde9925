"""What an exchange costs the database (chat/service.py `record_exchange`):
its two messages are stored in one statement, one round trip, in order; the session's lock, every write's
first statement after the caller's hold, runs prepared (no SQLAlchemy layers) and still locks the row."""

from __future__ import annotations

import pytest
from persona_service.chat.repository import ChatSessionRepository
from persona_service.chat.service import ChatSessionService, Reply
from persona_service.kernel.models import Message
from persona_service.kernel.principal import Principal
from persona_service.providers.pricing import PriceTable
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError


def test_an_exchange_stores_its_two_messages_in_one_statement(http, engine, tenant):
    persona = http.post("/v1/personas", json={"intent": "A ferry captain who hums sea shanties"}, headers=tenant.auth)
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth).json()
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(), "owner",
                          tenant.plan, False)
    statements: list[str] = []
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        exchange = ChatSessionService(conn, prices=PriceTable.from_env()).record_exchange(
            principal, session["sessionId"], Message("user", "Ahoy?"), Reply("Ahoy!", "stub", 3, 2, "stop"))
        conn.rollback()
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO CHAT_MESSAGES")]
    assert len(inserts) == 1  # was one per message
    # The accounting is a prepared UPDATE … RETURNING (issue 50), past SQLAlchemy, with the same counters.
    assert not [s for s in statements if s.lstrip().upper().startswith("UPDATE CHAT_SESSIONS")]
    assert (exchange.session.message_count, exchange.session.input_tokens, exchange.session.output_tokens) == (
        session["messageCount"] + 2, 3, 2)
    assert exchange.session.last_active_at >= exchange.reply.created_at
    assert (exchange.user_message.role, exchange.reply.role) == ("user", "assistant")
    assert (exchange.user_message.content, exchange.reply.content) == ("Ahoy?", "Ahoy!")
    assert exchange.reply.ordinal == exchange.user_message.ordinal + 1


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
