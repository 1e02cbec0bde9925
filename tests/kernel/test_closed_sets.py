"""A response's states stay inside their declared closed sets (docs/contract-decisions.md): each is a string field naming its enum
(`(rules).one_of_enum`), which OpenAPI lists and the SDKs type, and the
kernel refuses to answer a value outside it."""

from __future__ import annotations

import pytest
from persona.v1 import chat_pb2
from persona_service.kernel.transport.validation import check_closed_sets
from sqlalchemy import text
from support import assert_envelope


def test_a_declared_value_passes_and_any_other_is_refused_with_its_path():
    check_closed_sets(chat_pb2.ChatSession(status="archived"))
    page = chat_pb2.ListChatSessionsResponse(items=[chat_pb2.ChatSession(status="active"),
                                                    chat_pb2.ChatSession(status="paused")])
    with pytest.raises(RuntimeError, match=r"items\.status='paused'"):
        check_closed_sets(page)


def test_a_state_outside_its_set_never_reaches_a_client(http, engine, tenant):
    assert http.get("/v1/billing/subscription", headers=tenant.auth).json()["status"] == "active"
    with engine.begin() as conn:
        conn.execute(text("UPDATE subscriptions SET status = 'paused' WHERE org_id = :o"), {"o": tenant.org_id})
    try:
        assert_envelope(http.get("/v1/billing/subscription", headers=tenant.auth), 500, "internal_error")
    finally:
        with engine.begin() as conn:
            conn.execute(text("UPDATE subscriptions SET status = 'active' WHERE org_id = :o"), {"o": tenant.org_id})
    assert http.get("/v1/billing/subscription", headers=tenant.auth).json()["status"] == "active"
