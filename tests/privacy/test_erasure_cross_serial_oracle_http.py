"""A member's erasure beside the writes of the other aggregates it erases answers as one serial order would
(tests/oracle.py), through Envoy, without a call aborted and run again: the erasure (which soft-deletes the
member's personas and deletes their chat sessions, after their membership) fired beside a PATCH of their persona,
a message sent in their chat session, a new chat session of their persona, and an OpenAI-compatible completion of
it (a first use, which makes the key's completions session; and one in the completions session of the member's
own id, which the erasure deletes), and beside each of the member's other writes of their persona: DELETE,
archive, restore (of it deleted), rollback (to version 1 of it at version 2), refine, regenerate, audit and fork.

Refine, regenerate and fork run a generation. The unary call runs it in its own unit of work and answers once
the run has finished and its result is stored: the run, its steps, the version or the fork and their events commit
with the call or not at all; there is no separate acceptance a client sees (no 202, no run id to poll). So "serial"
is the whole call, its run's start included, before the erasure or after it (401: the key revoked). A run that
started before the erasure committed and stores after it must answer as the later of the two (401, nothing of it
left), never store a version or a fork for an erased member. (What a run drew from the generation quota in Redis
is not in the end state read.)

A second table fires the erasure beside the writes of what else it erases or revokes: an administrator's (a plain
member may not write keys) new API key and SCIM token, the revocation of another key or token of theirs (by them,
and a key's by the owner), and a new portrait of their persona, an edit, an approval and a rejection of one. The
SCIM groups' part of an erasure has its own table
(tests/scim/test_scim_erasure_serial_oracle_http.py)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from oracle import ROUNDS, Answer, Op, Table, body, check_named, fixture_body, params
from persona_service.kernel.principal import SCOPES
from races import reruns
from sqlalchemy import text
from support import wait_until

PAIR_ROUNDS = max(ROUNDS, 6)


@dataclass(frozen=True)
class Fixture:
    org_id: str
    user_id: str
    auth: dict[str, str]  # the member's key
    persona: str  # the member's
    session: str  # the member's chat with it
    completions: str  # the completions session of `user` = the member's id (one exchange)


def _fixture(http, engine, tenants, prepare: tuple[str, ...] = ()) -> Fixture:
    """A member (not the owner, who may not erase) of a new organization, with a key, a persona, a chat of it and a
    completions session of it under their own id; then what the operations named in `prepare` need (`PREPARE`)."""
    member = tenants.member()
    auth, user_id = member.auth, member.user_id
    # State: one intent in every run (the state reads the persona's name, which the model derives from it; the
    # generator's is new each time).
    persona = http.post("/v1/personas", headers=auth, json=fixture_body(
        "CreatePersona", state={"intent": "A lighthouse keeper who tells storm stories"}))
    assert persona.status_code == 200, persona.text
    ids = {"persona": persona.json()["id"]}
    session = http.post("/v1/chat/sessions", json=fixture_body("CreateChatSession", ids), headers=auth)
    assert session.status_code == 200, session.text
    # State: the member's own id as the `user` (the completions session the state reads is theirs).
    first = http.post("/v1/chat/completions", headers=auth,
                      json=fixture_body("CreateChatCompletion", ids, state={"user": user_id}))
    assert first.status_code == 200, first.text
    completions = http.get("/v1/chat/sessions", params={"personaId": persona.json()["id"], "userId": user_id},
                           headers=auth)
    assert completions.status_code == 200, completions.text
    (made,) = [s for s in completions.json()["items"] if s["title"] == "chat.completions"]
    fixture = Fixture(member.org_id, user_id, auth, persona.json()["id"], session.json()["sessionId"],
                      made["sessionId"])
    for name in prepare:
        if name in PREPARE:
            PREPARE[name](http, fixture)
    return fixture


def _at_version_2(http, f: Fixture) -> None:
    """The persona at version 2 (its fingerprint regenerated: the quickest new version), so that a rollback to
    version 1 is a write and not a 409."""
    # State: `fingerprint`, the quickest new version, which keeps the name (the generator's `draft_soul` rewrites it).
    again = http.post(f"/v1/personas/{f.persona}/regenerate", headers=f.auth,
                      json=fixture_body("RegeneratePersona", state={"fromStep": "fingerprint"}))
    assert again.status_code == 200 and again.json()["version"] == 2, again.text


def _deleted(http, f: Fixture) -> None:
    """The persona soft-deleted, so that a restore is a write and not a 409."""
    gone = http.delete(f"/v1/personas/{f.persona}", headers=f.auth)
    assert gone.status_code == 200, gone.text


# What an operation needs of the fixture beyond the common one (only the pairs that fire it pay for it).
PREPARE = {"persona-rollback": _at_version_2, "persona-restore": _deleted}


def _ops(http) -> list[Op]:
    # The state reads the persona's name, state and versions and the sessions' message counts: the distinguishing
    # fields are the display name, the refinement's instruction (the model writes the name from it), the step
    # regenerated from (`fingerprint` keeps the name; the generator's `draft_soul` rewrites it) and a completion's
    # `user` (which session it writes to); every other field is the generator's.
    def persona(path: str, rpc: str, distinguishing: dict | None = None):
        return lambda f: http.post(f"/v1/personas/{f.persona}{path}", json=body(rpc, distinguishing=distinguishing),
                                   headers=f.auth)

    return [
        Op("erase", lambda f: http.delete("/v1/privacy/me", headers=f.auth), "EraseMyData"),
        Op("send", lambda f: http.post(f"/v1/chat/sessions/{f.session}/messages", json=body("SendChatMessage"),
                                       headers=f.auth), "SendChatMessage"),
        Op("persona-patch", lambda f: http.patch(f"/v1/personas/{f.persona}", headers=f.auth, json=body(
            "UpdatePersona", distinguishing={"displayName": "Renamed"})), "UpdatePersona"),
        # (A create names no RPC, as in the persona table: tests/test_serial_oracle_coverage.py lists it in CREATES.)
        Op("create-session", lambda f: http.post("/v1/chat/sessions", headers=f.auth,
                                                 json=body("CreateChatSession", {"persona": f.persona}))),
        Op("complete", lambda f: http.post("/v1/chat/completions", headers=f.auth,
                                           json=body("CreateChatCompletion", {"persona": f.persona})),
           "CreateChatCompletion"),
        Op("complete-own", lambda f: http.post("/v1/chat/completions", headers=f.auth, json=body(
            "CreateChatCompletion", {"persona": f.persona}, distinguishing={"user": f.user_id})),
           "CreateChatCompletion"),
        # Persona writes the issue did not list, of the class `persona-patch` found (the hold in PersonaService.get).
        Op("persona-delete", lambda f: http.delete(f"/v1/personas/{f.persona}", headers=f.auth), "DeletePersona"),
        Op("persona-archive", persona("/archive", "ArchivePersona"), "ArchivePersona"),
        # The member's other writes of their persona (PersonaService: each holds the caller's membership first).
        Op("persona-restore", persona("/restore", "RestorePersona"), "RestorePersona"),
        Op("persona-rollback", persona("/rollback", "RollbackPersona", {"version": 1}), "RollbackPersona"),
        Op("persona-refine", persona("/refine", "RefinePersona", {"instruction": "Make him braver"}), "RefinePersona"),
        Op("persona-regenerate", persona("/regenerate", "RegeneratePersona", {"fromStep": "fingerprint"}),
           "RegeneratePersona"),
        Op("persona-audit", persona("/audit", "AuditPersona"), "AuditPersona"),
        Op("persona-fork", persona("/fork", "ForkPersona"), "ForkPersona"),
    ]


def _state(engine, f: Fixture):
    """From the tables (an erased member has no key to read them with): the member's membership, the persona's
    name, state (deleted included), version and versions stored, its forks (how many, how many deleted), the chat
    session's and the completions session's messages (None: the session is gone), and how many other sessions the
    persona has with how many messages."""
    with engine.connect() as conn:
        member, name, deleted, *persona = conn.execute(text(
            "SELECT (SELECT count(*) FROM memberships WHERE org_id = :o AND user_id = :u),"
            " p.display_name, p.deleted_at IS NOT NULL, p.state, p.version,"
            " (SELECT count(*) FROM persona_versions v WHERE v.persona_id = p.id),"
            " (SELECT count(*) FROM personas c WHERE c.parent_id = p.id),"
            " (SELECT count(*) FROM personas c WHERE c.parent_id = p.id AND c.deleted_at IS NOT NULL)"
            " FROM personas p WHERE p.id = :p"),
            {"o": f.org_id, "u": f.user_id, "p": f.persona}).one()
        counts = dict(conn.execute(text(
            "SELECT s.id, (SELECT count(*) FROM chat_messages m WHERE m.session_id = s.id) FROM chat_sessions s"
            " WHERE s.persona_id = :p"), {"p": f.persona}).all())
    ours = counts.pop(f.session, None), counts.pop(f.completions, None)
    return member, name, deleted, *persona, *ours, len(counts), sum(counts.values())


def _table(http, engine, tenants, prepare: tuple[str, ...] = ()) -> Table:
    """`prepare`: the names of the operations fired (a pair test's), whose fixture needs may go beyond the common
    one (`PREPARE`)."""
    table = Table("a member with a persona and a chat of it", make=lambda: _fixture(http, engine, tenants, prepare),
                  read=lambda f: _state(engine, f), ops=_ops(http))
    erase, send, patch, create, complete, complete_own, *persona_writes = table.ops
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
                   *((erase, write) for write in persona_writes)]
    return table


@dataclass(frozen=True)
class Credentials:
    org_id: str
    user_id: str
    auth: dict[str, str]  # the member's key
    owner: dict[str, str]  # a key of the organization's owner
    spare: str  # another API key of the member's
    token: str  # a SCIM token the member made
    persona: str  # the member's
    portrait: str  # a generated portrait of it


NO_WAIT = {"Prefer": "wait=0"}  # a portrait write's answer does not wait for its image


def _credentials(http, engine, tenants) -> Credentials:
    """An administrator (not the owner, who may not erase; a plain member may not write keys) of a new organization
    with a second API key, a SCIM token, a persona and a generated portrait of it; and a key of the owner."""
    member = tenants.member()
    with engine.begin() as conn:  # (before the key's first use: a principal's role is cached)
        conn.execute(text("UPDATE memberships SET role = 'admin' WHERE org_id = :o AND user_id = :u"),
                     {"o": member.org_id, "u": member.user_id})
        owner_id = conn.execute(text("SELECT owner_user_id FROM organizations WHERE id = :o"),
                                {"o": member.org_id}).scalar_one()
    owner = tenants.key(member.org_id, member.workspace_id, owner_id, member.plan, list(SCOPES))
    # (The generator's bodies: the state reads the spare key and the token by role, the persona's deletion and the
    # portraits' statuses, nothing a field of these sets.)
    spare = http.post("/v1/keys", json=fixture_body("CreateApiKey"), headers=member.auth)
    assert spare.status_code == 200, spare.text
    token = http.post("/v1/auth/scim/tokens", json=fixture_body("CreateScimToken"), headers=member.auth)
    assert token.status_code == 200, token.text
    persona = http.post("/v1/personas", json=fixture_body("CreatePersona"), headers=member.auth)
    assert persona.status_code == 200, persona.text
    pid = persona.json()["id"]
    made = http.post(f"/v1/personas/{pid}/portraits", json=fixture_body("CreatePortrait", {"persona": pid}),
                     headers={**member.auth, **NO_WAIT})
    assert made.status_code == 200, made.text

    def generated() -> bool:
        got = http.get(f"/v1/personas/{pid}/portraits/{made.json()['id']}", headers=member.auth)
        assert got.status_code == 200 and got.json()["status"] != "failed", got.text
        return got.json()["status"] == "generated"
    wait_until(generated, what="the fixture's portrait generated")
    return Credentials(member.org_id, member.user_id, member.auth, {"Authorization": f"Bearer {owner}"},
                       spare.json()["key"]["id"], token.json()["token"]["id"], pid, made.json()["id"])


def _portrait_answer(response: httpx.Response) -> Answer:
    """Status and code: the portrait error shape has the code as `error` itself (404, 422, 502)."""
    if response.status_code < 400:
        return response.status_code, ""
    error = response.json().get("error")
    return response.status_code, error if isinstance(error, str) else error.get("code", "")


def _credential_ops(http) -> list[Op]:
    # The state reads the credentials' names (distinguishing: a made key's and token's, the generator's being new
    # each run) and the portraits' statuses (no field of a body: the generator's).
    def portrait(path: str, rpc: str):
        return lambda c: _portrait_answer(http.post(f"/v1/personas/{c.persona}/{path.format(id=c.portrait)}",
                                                    json=body(rpc), headers={**c.auth, **NO_WAIT}))

    def revoke(path: str, rpc: str, by: str):
        return lambda c: http.post(path.format(c=c), json=body(rpc), headers=getattr(c, by))

    return [
        Op("erase", lambda c: http.delete("/v1/privacy/me", headers=c.auth), "EraseMyData"),
        Op("key-create", lambda c: http.post("/v1/keys", json=body("CreateApiKey", distinguishing={"name": "made"}),
                                             headers=c.auth), "CreateApiKey"),
        Op("key-revoke", revoke("/v1/keys/{c.spare}/revoke", "RevokeApiKey", "auth"), "RevokeApiKey"),
        # The owner revoking the member's key: both revoke it (one atomic UPDATE each), whichever comes first.
        Op("key-revoke-by-owner", revoke("/v1/keys/{c.spare}/revoke", "RevokeApiKey", "owner"), "RevokeApiKey"),
        Op("token-create", lambda c: http.post("/v1/auth/scim/tokens", headers=c.auth,
                                               json=body("CreateScimToken", distinguishing={"name": "made"})),
           "CreateScimToken"),
        Op("token-revoke", revoke("/v1/auth/scim/tokens/{c.token}/revoke", "RevokeScimToken", "auth"),
           "RevokeScimToken"),
        Op("portrait-create", portrait("portraits", "CreatePortrait"), "CreatePortrait"),
        Op("portrait-edit", portrait("portrait/{id}/edit", "EditPortrait"), "EditPortrait"),
        Op("portrait-approve", portrait("portraits/{id}/approve", "ApprovePortrait"), "ApprovePortrait"),
        Op("portrait-reject", portrait("portraits/{id}/reject", "RejectPortrait"), "RejectPortrait"),
    ]


def _credential_state(engine, c: Credentials):
    """From the tables: the member's membership; their keys and SCIM tokens (name, revoked), the spare key and
    token by role; whether the persona is deleted; its portraits (a new one's render, which may run before or
    after the erasure and fail once the persona is deleted, counts as `new`; approved, rejected and the canonical
    mark as they are)."""
    with engine.connect() as conn:
        member, deleted = conn.execute(text(
            "SELECT (SELECT count(*) FROM memberships WHERE org_id = :o AND user_id = :u),"
            " deleted_at IS NOT NULL FROM personas WHERE id = :p"),
            {"o": c.org_id, "u": c.user_id, "p": c.persona}).one()
        keys = conn.execute(text(
            "SELECT id, name, revoked_at IS NOT NULL FROM api_keys WHERE org_id = :o AND created_by_user_id = :u"),
            {"o": c.org_id, "u": c.user_id}).all()
        portraits = conn.execute(text(
            "SELECT status, canonical FROM portraits WHERE persona_id = :p"), {"p": c.persona}).all()
    roles = {c.spare: "spare", c.token: "token"}
    return (member, deleted, sorted((roles.get(i, name), revoked) for i, name, revoked in keys),
            sorted(((s if s in ("approved", "rejected") else "new"), canonical) for s, canonical in portraits))


def _table_credentials(http, engine, tenants) -> Table:
    table = Table("a member with keys, a SCIM token, a persona and a portrait of it",
                  make=lambda: _credentials(http, engine, tenants), read=lambda c: _credential_state(engine, c),
                  ops=_credential_ops(http))
    # Before every write here held the caller's membership first (then OrgDirectory.hold_caller, now the pipeline's
    # HoldCaller stage for every write: kernel/transport/stages/hold.py), where the serial
    # orders leave the new key or token revoked (made first) or none (401): `erase+key-create` 6 of 20 rounds and
    # `erase+token-create` 7 of 20 (and 3 of 6) answered 200 + 200 and left it live for the erased member (its
    # insert committed after the erasure's revocation had read the keys). The others met no divergence in 20.
    erase, *writes = table.ops
    table.pairs = [(erase, write) for write in writes]
    return table


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_an_erasure_beside_a_write_of_what_it_erases_answers_as_one_serial_order_without_a_rerun(
        stack, http, engine, tenants, a, b):
    before = reruns(stack)
    assert check_named(_table(http, engine, tenants, (a, b)), a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"


@pytest.mark.parametrize(("a", "b"), params(_table_credentials(None, None, None)))
def test_an_erasure_beside_a_write_of_the_members_keys_or_portraits_answers_as_one_serial_order_without_a_rerun(
        stack, http, engine, tenants, a, b):
    before = reruns(stack)
    assert check_named(_table_credentials(http, engine, tenants), a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"
