"""OpenAI-compatible completions at once answer as one serial order would (tests/oracle.py), through Envoy: a
completion is accounted in the caller's completions session for (persona, `user`), made on first use
(chat/completions.py), so two completions of one `user` share a session. Each pair is fired together behind a
barrier and compared with both serial orders, in two states: no session yet (two first uses must make one
session, not two) and a session with one exchange, beside its end (a completion after the end opens a new
session; one before it is in the ended one). The end state is that user's sessions: status, messages, tokens.

The shared stack's offline model answers in about a millisecond: these pairs check the accounting's decisions
(which session, what it counts); the window a slow model opens is the chat table's
(tests/chat/test_chat_serial_oracle_http.py), where every write of a session is tried."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import pytest
from oracle import Answer, Op, Table, body, check_named, fixture_body, state_params, uncovered


@dataclass(frozen=True)
class Fixture:
    user: str  # the request's `user`: a completions session of its own
    session: str  # "" before the first use


def _sessions(http, auth: dict[str, str], persona: str, user: str) -> list[dict]:
    got = http.get("/v1/chat/sessions", params={"personaId": persona, "userId": user, "limit": 100}, headers=auth)
    assert got.status_code == 200, got.text
    return got.json()["items"]


def _fixture(http, tenant, persona: str, used: bool) -> Fixture:
    user = f"oracle-{uuid.uuid4()}"
    if not used:
        return Fixture(user, "")
    # State: the `user` (a session of its own, which the state reads) and the first exchange's words (its token
    # counts are read); the model is the generator's (the persona's).
    first = http.post("/v1/chat/completions", headers=tenant.auth, json=fixture_body(
        "CreateChatCompletion", {"persona": persona},
        state={"user": user, "messages": [{"role": "user", "content": "Good morning"}]}))
    assert first.status_code == 200, first.text
    (session,) = _sessions(http, tenant.auth, persona, user)
    return Fixture(user, session["sessionId"])


def _answer(response) -> Answer:
    if response.status_code < 400:
        return response.status_code, ""
    return response.status_code, response.json().get("error", {}).get("code", "?")


def _ops(http, tenant, persona, used: bool) -> list[Op]:
    auth = tenant.auth if tenant is not None else {}

    def sent(rpc: str, f: Fixture, content: str, **binding) -> dict:
        """Distinguishing: the `user` (the state reads that user's sessions) and the message (the token counts the
        state reads follow it); the model is the generator's (the persona's). `binding`: `stream` asks for the
        stream at /v1/chat/completions, as OpenAI's clients ask for one (not a field of the state)."""
        return body(rpc, {"persona": persona}, distinguishing={
            "user": f.user, "messages": [{"role": "user", "content": content}], **binding})

    def complete(f: Fixture) -> Answer:
        return _answer(http.post("/v1/chat/completions", json=sent("CreateChatCompletion", f, "How is the sea?"),
                                 headers=auth))

    def stream(f: Fixture) -> Answer:
        """Its status, or the in-band error that ended a started stream."""
        with http.stream("POST", "/v1/chat/completions", headers=auth,
                         json=sent("StreamChatCompletion", f, "And the wind?", stream=True)) as r:
            if r.status_code != 200:
                r.read()
                return _answer(r)
            lines = [line[len("data: "):] for line in r.iter_lines() if line.startswith("data: ")]
        assert lines and lines[-1] == "[DONE]" or any('"error"' in line for line in lines), lines
        errors = [json.loads(line)["error"] for line in lines if line != "[DONE]" and "error" in json.loads(line)]
        return 200, errors[0].get("code", "?") if errors else ""

    ops = [Op("complete", complete, "CreateChatCompletion"), Op("stream", stream, "StreamChatCompletion")]
    if used:
        ops.append(Op("end", lambda f: _answer(http.post(f"/v1/chat/sessions/{f.session}/end",
                                                         json=body("EndChatSession"), headers=auth))))
    return ops


def _state(http, tenant, persona: str, f: Fixture):
    counters = ("status", "messageCount", "inputTokens", "outputTokens")
    return sorted(tuple(s[k] for k in counters) for s in _sessions(http, tenant.auth, persona, f.user))


def _table(http, tenant, persona, used: bool) -> Table:
    return Table(f"completions of one user: {'a session with one exchange' if used else 'no session yet'}",
                 make=lambda: _fixture(http, tenant, persona, used), read=lambda f: _state(http, tenant, persona, f),
                 ops=_ops(http, tenant, persona, used))


STATES = {"no-session-yet": False, "a-session-with-one-exchange": True}


@pytest.fixture(scope="module")
def caller(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def persona(http, caller) -> str:
    # State: one intent for the module (the persona's voice sets the replies' token counts the state reads).
    made = http.post("/v1/personas", headers=caller.auth, json=fixture_body(
        "CreatePersona", state={"intent": "A tide-table keeper who answers in short sentences"}))
    assert made.status_code == 200, made.text
    return made.json()["id"]


@pytest.mark.parametrize(("state", "a", "b"), state_params(STATES, lambda used: _table(None, None, None, used)))
def test_two_completions_at_once_answer_as_one_serial_order(http, caller, persona, state, a, b):
    assert check_named(_table(http, caller, persona, STATES[state]), a, b) == []


def test_the_oracle_tries_every_completion():
    tables = [_table(None, None, None, used) for used in STATES.values()]
    assert uncovered("OpenAIService", tables) == set()
