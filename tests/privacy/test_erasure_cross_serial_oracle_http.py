"""A member's erasure beside the writes of the other aggregates it erases answers as one serial order would
(tests/oracle.py), through Envoy, without a call aborted and run again: the erasure (which soft-deletes the
member's personas and deletes their chat sessions, after their membership) fired beside a PATCH of their persona,
a message sent in their chat session, a new chat session of their persona, and an OpenAI-compatible completion of
it (a first use, which makes the key's completions session; and one in the completions session of the member's
own id, which the erasure deletes). The SCIM groups' part of an erasure has its own table
(tests/scim/test_scim_erasure_serial_oracle_http.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import ROUNDS, Op, Table, check_named, params
from races import reruns
from sqlalchemy import text

PAIR_ROUNDS = max(ROUNDS, 6)


@dataclass(frozen=True)
class Fixture:
    org_id: str
    user_id: str
    auth: dict[str, str]  # the member's key
    persona: str  # the member's
    session: str  # the member's chat with it
    completions: str  # the completions session of `user` = the member's id (one exchange)


def _fixture(http, engine, tenants) -> Fixture:
    """A member (not the owner, who may not erase) of a new organization, with a key, a persona, a chat of it and a
    completions session of it under their own id."""
    member = tenants.member()
    auth, user_id = member.auth, member.user_id
    persona = http.post("/v1/personas", json={"intent": "A lighthouse keeper who tells storm stories"}, headers=auth)
    assert persona.status_code == 200, persona.text
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=auth)
    assert session.status_code == 200, session.text
    first = http.post("/v1/chat/completions", json=_completion(persona.json()["id"], user_id), headers=auth)
    assert first.status_code == 200, first.text
    completions = http.get("/v1/chat/sessions", params={"personaId": persona.json()["id"], "userId": user_id},
                           headers=auth)
    assert completions.status_code == 200, completions.text
    (made,) = [s for s in completions.json()["items"] if s["title"] == "chat.completions"]
    return Fixture(member.org_id, user_id, auth, persona.json()["id"], session.json()["sessionId"], made["sessionId"])


def _completion(persona: str, user: str = "") -> dict:
    """An OpenAI-compatible completion's body: `user` names its completions session (none: the key's)."""
    return {"model": f"persona://{persona}", "messages": [{"role": "user", "content": "How is the sea?"}],
            **({"user": user} if user else {})}


def _ops(http) -> list[Op]:
    return [
        Op("erase", lambda f: http.delete("/v1/privacy/me", headers=f.auth), "EraseMyData"),
        Op("send", lambda f: http.post(f"/v1/chat/sessions/{f.session}/messages", json={"content": "Hello there"},
                                       headers=f.auth), "SendChatMessage"),
        Op("persona-patch", lambda f: http.patch(f"/v1/personas/{f.persona}", json={"displayName": "Renamed"},
                                                 headers=f.auth), "UpdatePersona"),
        # (A create names no RPC, as in the persona table: tests/test_serial_oracle_coverage.py lists it in CREATES.)
        Op("create-session", lambda f: http.post("/v1/chat/sessions", json={"personaId": f.persona}, headers=f.auth)),
        Op("complete", lambda f: http.post("/v1/chat/completions", json=_completion(f.persona), headers=f.auth),
           "CreateChatCompletion"),
        Op("complete-own", lambda f: http.post("/v1/chat/completions", json=_completion(f.persona, f.user_id),
                                               headers=f.auth), "CreateChatCompletion"),
        # Persona writes the issue did not list, of the class `persona-patch` found (the hold in PersonaService.get).
        Op("persona-delete", lambda f: http.delete(f"/v1/personas/{f.persona}", headers=f.auth), "DeletePersona"),
        Op("persona-archive", lambda f: http.post(f"/v1/personas/{f.persona}/archive", json={}, headers=f.auth),
           "ArchivePersona"),
    ]


def _state(engine, f: Fixture):
    """From the tables (an erased member has no key to read them with): the member's membership, the persona's
    name and whether it is deleted, the chat session's and the completions session's messages (None: the session
    is gone), and how many other sessions the persona has with how many messages."""
    with engine.connect() as conn:
        member, name, deleted = conn.execute(text(
            "SELECT (SELECT count(*) FROM memberships WHERE org_id = :o AND user_id = :u),"
            " p.display_name, p.deleted_at IS NOT NULL FROM personas p WHERE p.id = :p"),
            {"o": f.org_id, "u": f.user_id, "p": f.persona}).one()
        counts = dict(conn.execute(text(
            "SELECT s.id, (SELECT count(*) FROM chat_messages m WHERE m.session_id = s.id) FROM chat_sessions s"
            " WHERE s.persona_id = :p"), {"p": f.persona}).all())
    ours = counts.pop(f.session, None), counts.pop(f.completions, None)
    return member, name, deleted, *ours, len(counts), sum(counts.values())


def _table(http, engine, tenants) -> Table:
    table = Table("a member with a persona and a chat of it", make=lambda: _fixture(http, engine, tenants),
                  read=lambda f: _state(engine, f), ops=_ops(http))
    erase, send, patch, create, complete, complete_own, delete, archive = table.ops
    # (The writes among themselves: the chat and persona tables.) `erase+send` answered 404 in 1 of 6 rounds, then
    # 5 of 12, before a chat write held the sender's membership (ChatSessionService.locked): a send let in before
    # the erasure committed waited for the session the erasure deletes and found none, where the serial orders
    # answer 200 (send first) or 401 (its key revoked).
    # Before a session's create and a completion held the caller's membership first (ChatSessionService.create,
    # CompletionService.complete), where the serial orders answer 200 or 401: `erase+create-session` answered 404
    # `not_found` (2 of 12 rounds; it waited on the persona, held FOR SHARE, that the erasure soft-deleted),
    # `erase+complete` 404 `not_found` (4 of 6: its first use's create, the same wait) and `erase+complete-own` 404
    # `model_not_found` or `not_found` (5 of 6: its model read after the erasure committed, or its session gone).
    table.pairs = [(erase, send), (erase, patch), (erase, create), (erase, complete), (erase, complete_own),
                   (erase, delete), (erase, archive)]
    return table


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_an_erasure_beside_a_write_of_what_it_erases_answers_as_one_serial_order_without_a_rerun(
        stack, http, engine, tenants, a, b):
    before = reruns(stack)
    assert check_named(_table(http, engine, tenants), a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"
