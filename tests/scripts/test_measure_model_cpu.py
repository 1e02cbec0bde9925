"""scripts/measure_model_cpu.py's replay: the model's own part of a request's CPU, the captured calls run again
in-process. A refusal the service answers costs the model its work and counts; anything else (a call whose
shape no longer fits the provider) ends the measurement instead of counting as a cheap model. A chat reply's whole
model work (answered in the server, with nothing to capture) is replayed from what the service stored, and a
replay that no longer gives the stored reply ends the measurement."""

from __future__ import annotations

import sys

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from measure_model_cpu import replay, replay_replies  # noqa: E402  (scripts/ is not a package)


def test_a_captured_call_is_run_again_and_timed():
    total, by_op = replay([{"op": "embed", "args": {"texts": ["a line the persona says"]}}])
    assert set(by_op) == {"embed"} and total == by_op["embed"] > 0


def test_a_call_that_no_longer_fits_the_provider_ends_the_measurement():
    with pytest.raises(KeyError):  # planted: the args a changed signature would no longer find
        replay([{"op": "embed", "args": {"inputs": ["a line"]}}])


def test_a_chat_replys_whole_model_work_is_replayed_from_what_was_stored(stack, http, tenant):
    persona = http.post("/v1/personas", json={"intent": "A ferry pilot who sings"}, headers=tenant.auth).json()["id"]
    session = http.post("/v1/chat/sessions", json={"personaId": persona}, headers=tenant.auth).json()["sessionId"]
    sent = []
    for content in ("How was the crossing?", "And the fog?"):
        r = http.post(f"/v1/chat/sessions/{session}/messages", json={"content": content}, headers=tenant.auth)
        assert r.status_code == 200, r.text
        sent.append((session, content, r.json()["userMessage"]["ordinal"]))
    work = replay_replies(stack.database_url, sent)
    assert set(work["model (whole reply) by op"]) == {"generate", "moderate", "embed"}
    assert work["model (whole reply)"] > 0
    refused = [(session, "A message that was refused", None), *sent]  # a refusal's history: before the next one
    assert replay_replies(stack.database_url, refused)["model (whole reply)"] > 0
    with pytest.raises(SystemExit, match="differs"):  # planted: a reply to another message than the one stored
        replay_replies(stack.database_url, [(session, "Something else entirely", sent[0][2])])
