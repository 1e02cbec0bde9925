"""Every pair of a chat session's writes at once answers as one serial order would (tests/oracle.py),
through Envoy, on a stack whose model (a stand-in server) takes MODEL_SECONDS to answer: send,
regenerate, choose, edit, delete, end, in the states the table names
(the last reply with alternatives; a trailing user message, whose reply was deleted), and a send whose reply
drifts out of the persona's voice (refused with 409 `drift_blocked`, its `persona.audit_failed` event kept). The
end state is read back (the messages with their alternatives and edits, the session's counters and usage, and
the events that name the session), so two replies in one turn, a reply billed from a transcript that changed,
an event recorded twice or for a session already ended, or a 503 after a lock wait all fail."""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime

import pytest
from oracle import Op, Table, body, check_named, events, fixture_body, since, state_params, uncovered
from persona_service.kernel.models import Completion
from providers.openai_stub import OpenAIStub, guess_task, local_responder
from support import TenantFactory, client_for, engine_for, make_stack, running, sse_stream


@dataclass(frozen=True)
class Fixture:
    sid: str
    first_user: str  # the first message (u0)
    first_reply: str  # its reply (a1)
    last: str  # the last message: a reply with alternatives, or a user message left without one
    last_user: str
    made: datetime  # (the session's events occurred after)


# A model that takes this long to answer (a stand-in server, as a real one does): the window between a
# write's read and its lock is then as wide as a real model makes it, not the offline model's millisecond.
MODEL_SECONDS = 0.05


def _reply_with_its_context(body: dict) -> Completion:
    """The offline model's reply, ending with a digest of the whole transcript it was given: a reply built from
    a transcript no serial order sends (an edit not yet seen, another tab's exchange missing) reads differently."""
    done = local_responder(body)
    if guess_task(body) != "reply" or not done.text:
        return done
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()[:8]
    # The temperature too: alternatives regenerated with different settings differ, so which one a later
    # reply was built on shows in that reply's digest.
    return replace(done, text=f"{done.text} [t={body.get('temperature')} {digest}]")


@pytest.fixture(scope="module")
def slow_model():
    with OpenAIStub(chat_only=True) as stub:
        stub.latency = MODEL_SECONDS
        stub.responder = _reply_with_its_context
        yield stub


@pytest.fixture(scope="module")
def slow_stack(tmp_path_factory, slow_model):
    # No webhook worker: the events are read back from the table, none is delivered.
    with running(make_stack(tmp_path_factory.mktemp("oracle-slow-model"), workers=0, **slow_model.stack_env())) as stack:
        yield stack


@contextlib.contextmanager
def _at_once(model: OpenAIStub | None):
    """The model answers without MODEL_SECONDS while a fixture is built: its session is made by one caller, one
    call after another, so no window is there to widen (the pairs' own calls keep the latency), and the replies are
    the same (they depend on the transcript and the temperature only). Each pair builds three fixtures of two or
    three replies: about 1,000 waits of 50 ms in this module otherwise (issue 46)."""
    if model is None:
        yield
        return
    model.latency = 0.0
    try:
        yield
    finally:
        model.latency = MODEL_SECONDS


@pytest.fixture(scope="module")
def slow_http(slow_stack):
    with client_for(slow_stack, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def chat(slow_stack, slow_http):
    with engine_for(slow_stack) as engine:
        tenant = TenantFactory(engine)(plan="enterprise")
    # State: one intent for the module (the persona's voice is in every reply the state reads).
    made = _ok(slow_http.post("/v1/personas", headers=tenant.auth, json=fixture_body(
        "CreatePersona", state={"intent": "A retired ferry captain who counts gulls"})))
    return tenant, made["id"]


def _ok(response):
    assert response.status_code == 200, response.text
    return response.json()


def _fixture(http, tenant, persona_id, trailing_user: bool, model: OpenAIStub | None = None) -> Fixture:
    made = since()
    with _at_once(model):
        return _made(http, tenant, persona_id, trailing_user, made)


def _made(http, tenant, persona_id, trailing_user: bool, made: datetime) -> Fixture:
    sid = _ok(http.post("/v1/chat/sessions", headers=tenant.auth,
                        json=fixture_body("CreateChatSession", {"persona": persona_id})))["sessionId"]

    def send(content: str) -> dict:
        # State: the words of the fixture's exchanges (the state reads the transcript and each reply's digest of
        # it; the generator's content is new each run).
        return _ok(http.post(f"/v1/chat/sessions/{sid}/messages", headers=tenant.auth,
                             json=fixture_body("SendChatMessage", state={"content": content})))

    one, two = send("Morning. How is the harbour?"), send("How many gulls today?")
    reply = two["reply"]["id"]
    if trailing_user:
        _ok(http.delete(f"/v1/chat/sessions/{sid}/messages/{reply}", headers=tenant.auth))
        last = two["userMessage"]["id"]
    else:
        # State: the alternative's temperature (a reply's digest shows it: unlike the operations' 0.9).
        last = _ok(http.post(f"/v1/chat/sessions/{sid}/messages/{reply}/regenerate", headers=tenant.auth,
                             json=fixture_body("RegenerateChatMessage", state={"temperature": 0.5})))["reply"]["id"]
    return Fixture(sid, one["userMessage"]["id"], one["reply"]["id"], last, two["userMessage"]["id"], made)


def _state(http, tenant, fixture: Fixture):
    """The session and its conversation, ids and times aside (messages by ordinal and role), and the events that
    name the session (a drifting reply's `persona.audit_failed`, a flagged one's `moderation.flagged`)."""
    session = _ok(http.get(f"/v1/chat/sessions/{fixture.sid}", headers=tenant.auth))
    messages = _ok(http.get(f"/v1/chat/sessions/{fixture.sid}/messages", params={"limit": 100},
                            headers=tenant.auth))["items"]
    counters = ("status", "messageCount", "inputTokens", "outputTokens", "costUsdMicros")
    recorded = events(http, tenant.auth, fixture.made, lambda data: data.get("subjectId") == fixture.sid)
    return ({k: session.get(k) for k in counters},
            [(m["ordinal"], m["role"], m["content"], m.get("swipeIndex", 0), m.get("swipeCount", 1),
              m.get("edited", False), m.get("usage")) for m in messages], recorded)


def _ops(http, tenant, trailing_user: bool) -> list[Op]:
    base = "/v1/chat/sessions/{f.sid}/messages"
    auth = tenant.auth if tenant is not None else {}  # (None: only the names, for the parameters)

    # The state reads the transcript: each message's content, and each reply's digest of the transcript and the
    # temperature it was made with. So the distinguishing fields are a message's content (the generator's is new
    # each run), a regeneration's temperature (unlike the fixture's alternative's) and the alternative chosen.
    def post(path: str, rpc: str, distinguishing: dict | None = None):
        return lambda f: http.post(path.format(f=f), json=body(rpc, distinguishing=distinguishing), headers=auth)

    def edit(message: str, content: str):
        return lambda f: http.patch(base.format(f=f) + f"/{getattr(f, message)}", headers=auth,
                                    json=body("UpdateChatMessage", distinguishing={"content": content}))

    def streamed(f: Fixture):
        """A streamed send's outcome: its status, or the in-band error that ended a started stream."""
        with http.stream("POST", base.format(f=f) + ":stream", headers=auth,
                         json=body("StreamChatMessage", distinguishing={"content": "And the ferry?"})) as r:
            if r.status_code != 200:
                r.read()
                return r
            events = list(sse_stream(r.iter_lines()))
        errors = [e.json().get("error", {}).get("code", "?") for e in events if e.event == "error"]
        return 200, errors[0] if errors else ""

    ops = [
        Op("send", post(base, "SendChatMessage", {"content": "And the ferry?"}), "SendChatMessage"),
        Op("stream-send", streamed, "StreamChatMessage"),
        Op("regenerate-last", post(base + "/{f.last}/regenerate", "RegenerateChatMessage", {"temperature": 0.9}),
           "RegenerateChatMessage"),
        Op("edit-first", edit("first_user", "Evening."), "UpdateChatMessage"),
        Op("edit-last-user", edit("last_user", "How many terns?"), "UpdateChatMessage"),
        Op("delete-last", lambda f: http.delete(base.format(f=f) + f"/{f.last}", headers=auth), "DeleteChatMessage"),
        Op("delete-first-reply", lambda f: http.delete(base.format(f=f) + f"/{f.first_reply}", headers=auth),
           "DeleteChatMessage"),
        Op("end", post("/v1/chat/sessions/{f.sid}/end", "EndChatSession"), "EndChatSession"),
        Op("archive", post("/v1/chat/sessions/{f.sid}/archive", "ArchiveChatSession"), "ArchiveChatSession"),
    ]
    if not trailing_user:
        ops.append(Op("choose-first", post(base + "/{f.last}/choose", "ChooseChatMessage", {"swipeIndex": 0}),
                      "ChooseChatMessage"))
        # The stand-in model answers `[[drift]]` out of voice: refused (the persona's action is `block`), nothing
        # stored, and one `persona.audit_failed` naming the session recorded, if the send got that far.
        ops.append(Op("send-drift", post(base, "SendChatMessage", {"content": "[[drift]] And the ferry?"}),
                      "SendChatMessage"))
    return ops


def _table(http, tenant, persona_id, trailing_user: bool, model: OpenAIStub | None = None) -> Table:
    return Table(
        f"chat session: {'a trailing user message' if trailing_user else 'the last reply with alternatives'}",
        make=lambda: _fixture(http, tenant, persona_id, trailing_user, model),
        read=lambda f: _state(http, tenant, f),
        ops=_ops(http, tenant, trailing_user),
    )


STATES = {"last-reply-with-alternatives": False, "trailing-user-message": True}


@pytest.mark.parametrize(("state", "a", "b"), state_params(STATES, lambda trailing: _table(None, None, None, trailing)))
def test_two_writes_at_once_answer_as_one_serial_order(slow_http, slow_model, chat, state, a, b):
    tenant, persona_id = chat
    assert check_named(_table(slow_http, tenant, persona_id, STATES[state], slow_model), a, b) == []


def test_the_oracle_tries_every_write_of_a_session():
    """A write RPC added to ChatService fails this until the table above calls it (creating a session makes a
    new one: two creates never share a session)."""
    tables = [_table(None, None, None, trailing) for trailing in STATES.values()]
    assert uncovered("ChatService", tables, {"CreateChatSession"}) == set()
