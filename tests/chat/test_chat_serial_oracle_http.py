"""Every pair of a chat session's writes at once answers as one serial order would (tests/oracle.py),
through Envoy: send, regenerate, choose, edit, delete, end, archive, in the states the table names
(the last reply with alternatives; a trailing user message, whose reply was deleted). The end state is
read back (the messages with their alternatives and edits, the session's counters and usage), so two
replies in one turn, a reply billed from a transcript that changed, or a 503 after a lock wait all fail."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair
from test_chat_http import make_persona, make_session, send


@dataclass(frozen=True)
class Fixture:
    sid: str
    first_user: str  # the first message (u0)
    first_reply: str  # its reply (a1)
    last: str  # the last message: a reply with alternatives, or a user message left without one
    last_user: str


@pytest.fixture(scope="module")
def chat(http, tenants):
    tenant = tenants(plan="enterprise")
    return tenant, make_persona(http, tenant, "A retired ferry captain who counts gulls")


def _ok(response):
    assert response.status_code == 200, response.text
    return response.json()


def _fixture(http, tenant, persona_id, trailing_user: bool) -> Fixture:
    sid = make_session(http, tenant, persona_id)["sessionId"]
    one = _ok(send(http, tenant, sid, "Morning. How is the harbour?"))
    two = _ok(send(http, tenant, sid, "How many gulls today?"))
    reply = two["reply"]["id"]
    if trailing_user:
        _ok(http.delete(f"/v1/chat/sessions/{sid}/messages/{reply}", headers=tenant.auth))
        last = two["userMessage"]["id"]
    else:
        last = _ok(http.post(f"/v1/chat/sessions/{sid}/messages/{reply}/regenerate", json={},
                             headers=tenant.auth))["reply"]["id"]
    return Fixture(sid, one["userMessage"]["id"], one["reply"]["id"], last, two["userMessage"]["id"])


def _state(http, tenant, fixture: Fixture):
    """The session and its conversation, ids and times aside (messages by ordinal and role)."""
    session = _ok(http.get(f"/v1/chat/sessions/{fixture.sid}", headers=tenant.auth))
    messages = _ok(http.get(f"/v1/chat/sessions/{fixture.sid}/messages", params={"limit": 100},
                            headers=tenant.auth))["items"]
    counters = ("status", "messageCount", "inputTokens", "outputTokens", "costUsdMicros")
    return ({k: session.get(k) for k in counters},
            [(m["ordinal"], m["role"], m["content"], m.get("swipeIndex", 0), m.get("swipeCount", 1),
              m.get("edited", False), m.get("usage")) for m in messages])


def _ops(http, tenant, trailing_user: bool) -> list[Op]:
    base = "/v1/chat/sessions/{f.sid}/messages"
    auth = tenant.auth if tenant is not None else {}  # (None: only the names, for the parameters)

    def post(path: str, body: dict):
        return lambda f: http.post(path.format(f=f), json=body, headers=auth)

    ops = [
        Op("send", post(base, {"content": "And the ferry?"})),
        Op("regenerate-last", post(base + "/{f.last}/regenerate", {})),
        Op("edit-first", lambda f: http.patch(base.format(f=f) + f"/{f.first_user}", json={"content": "Evening."},
                                              headers=auth)),
        Op("edit-last-user", lambda f: http.patch(base.format(f=f) + f"/{f.last_user}",
                                                  json={"content": "How many terns?"}, headers=auth)),
        Op("delete-last", lambda f: http.delete(base.format(f=f) + f"/{f.last}", headers=auth)),
        Op("delete-first-reply", lambda f: http.delete(base.format(f=f) + f"/{f.first_reply}", headers=auth)),
        Op("end", post("/v1/chat/sessions/{f.sid}/end", {})),
    ]
    if not trailing_user:
        ops.append(Op("choose-first", post(base + "/{f.last}/choose", {"swipeIndex": 0})))
    return ops


def _table(http, tenant, persona_id, trailing_user: bool) -> Table:
    return Table(
        f"chat session: {'a trailing user message' if trailing_user else 'the last reply with alternatives'}",
        make=lambda: _fixture(http, tenant, persona_id, trailing_user),
        read=lambda f: _state(http, tenant, f),
        ops=_ops(http, tenant, trailing_user),
    )


STATES = {"last-reply-with-alternatives": False, "trailing-user-message": True}
PAIRS = [(state, a, b) for state, trailing in STATES.items()
         for a, b in _table(None, None, None, trailing).pairs]
PAIR_IDS = [f"{state}:{a.name}+{b.name}" for state, a, b in PAIRS]


@pytest.mark.parametrize(("state", "a", "b"), [(s, a.name, b.name) for s, a, b in PAIRS], ids=PAIR_IDS)
def test_two_writes_at_once_answer_as_one_serial_order(http, chat, state, a, b):
    tenant, persona_id = chat
    table = _table(http, tenant, persona_id, STATES[state])
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []
