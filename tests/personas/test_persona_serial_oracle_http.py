"""A persona's writes at once answer as one serial order would (tests/oracle.py), through Envoy: PATCH,
delete, restore, archive, rollback, audit, refine, regenerate and fork of a persona at version 2, and the writes
of other aggregates made of it (a chat session, a marketplace listing), each pair fired together behind a barrier
and compared with both serial orders (state, version, display name, and how many forks, sessions and listings
it has)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, fixture_body, params, uncovered

OWN_EVENTS = ("persona.", "generation.")


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]
    persona: str


def _fixture(http, tenant) -> Fixture:
    """A persona at version 2 (created, then its fingerprint regenerated: the quickest new version), so that a
    rollback to version 1 is a write and not a 409."""
    # State: one intent in every run (the model derives the display name the state reads from it; the generator's
    # is new each time).
    made = http.post("/v1/personas", headers=tenant.auth, json=fixture_body(
        "CreatePersona", state={"intent": "A patient ferry captain who collects sea shanties"}))
    assert made.status_code == 200, made.text
    pid = made.json()["id"]
    # State: `fingerprint`, the quickest new version, which keeps the name (the generator's `draft_soul` rewrites it).
    again = http.post(f"/v1/personas/{pid}/regenerate", headers=tenant.auth,
                      json=fixture_body("RegeneratePersona", state={"fromStep": "fingerprint"}))
    assert again.status_code == 200 and again.json()["version"] == 2, again.text
    return Fixture(tenant.auth, pid)


def _ops(http) -> list[Op]:
    def post(path: str, rpc: str, distinguishing: dict | None = None):
        return lambda f: http.post(f"/v1/personas/{f.persona}{path}", json=body(rpc, distinguishing=distinguishing),
                                   headers=f.auth)

    return [
        # Distinguishing: the display name (the state reads it; the generator's is new each run).
        Op("patch", lambda f: http.patch(f"/v1/personas/{f.persona}", headers=f.auth, json=body(
            "UpdatePersona", distinguishing={"displayName": "Renamed"})), "UpdatePersona"),
        Op("delete", lambda f: http.delete(f"/v1/personas/{f.persona}", headers=f.auth), "DeletePersona"),
        Op("restore", post("/restore", "RestorePersona"), "RestorePersona"),
        Op("archive", post("/archive", "ArchivePersona"), "ArchivePersona"),
        # Distinguishing: version 1 (the state reads the version; the generator's smallest is it too).
        Op("rollback", post("/rollback", "RollbackPersona", {"version": 1}), "RollbackPersona"),
        Op("audit", post("/audit", "AuditPersona"), "AuditPersona"),
        # Distinguishing: the instruction (the refined persona the model writes from it, its name, is read: one
        # instruction in every run, not the generator's new one).
        Op("refine", post("/refine", "RefinePersona", {"instruction": "Make him braver"}), "RefinePersona"),
        # Distinguishing: the step (the generator's first, `draft_soul`, rewrites the soul and the name the state
        # reads; `fingerprint` keeps them and is the quickest new version, as the fixture's).
        Op("regenerate", post("/regenerate", "RegeneratePersona", {"fromStep": "fingerprint"}), "RegeneratePersona"),
        Op("fork", post("/fork", "ForkPersona"), "ForkPersona"),  # (the state counts forks: no field of it is read)
        # Writes of other aggregates that hold the persona FOR SHARE (ChatService, MarketplaceService); the state
        # counts them, so the generator's bodies on the persona's id are enough.
        Op("session", lambda f: http.post("/v1/chat/sessions", json=body("CreateChatSession", {"persona": f.persona}),
                                          headers=f.auth)),
        Op("listing", lambda f: http.post("/v1/marketplace/listings", headers=f.auth,
                                          json=body("CreateListing", {"persona": f.persona}))),
    ]


def _state(http, f: Fixture):
    got = http.get(f"/v1/personas/{f.persona}", headers=f.auth)
    assert got.status_code == 200, got.text
    persona = got.json()
    lineage = http.get(f"/v1/personas/{f.persona}/lineage", headers=f.auth)
    assert lineage.status_code == 200, lineage.text
    sessions = http.get("/v1/chat/sessions", params={"personaId": f.persona}, headers=f.auth)
    assert sessions.status_code == 200, sessions.text
    listings = http.get("/v1/marketplace/listings", params={"mine": True}, headers=f.auth)
    assert listings.status_code == 200, listings.text
    mine = [item for item in listings.json()["items"] if item["personaId"] == f.persona]
    # The events the persona's own writes record about it, in their transactions (a listing's, written later by
    # its review, are left out: when they land is the runner's timing): a run that records one twice, or one for
    # a write no serial order lets through, reads differently.
    events = http.get("/v1/events", params={"personaId": f.persona, "limit": 100}, headers=f.auth)
    assert events.status_code == 200, events.text
    return (persona["state"], persona["version"], persona["displayName"], len(lineage.json()["root"]["children"]),
            len(sessions.json()["items"]), len(mine), tuple(sorted(e["type"] for e in events.json()["items"] if e["type"].startswith(OWN_EVENTS))))


def _table(http, tenant) -> Table:
    return Table("a persona at version 2", make=lambda: _fixture(http, tenant), read=lambda f: _state(http, f),
                 ops=_ops(http))


@pytest.fixture(scope="module")
def owner(tenants):
    return tenants(plan="team")


@pytest.mark.parametrize(("a", "b"), params(_table(None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, owner, a, b):
    assert check_named(_table(http, owner), a, b) == []


def test_the_oracle_tries_every_write_of_a_persona():
    """All but the creates (a new persona: two at once never share one)."""
    creates = {"CreatePersona", "StreamCreatePersona", "ImportPersonaCard"}
    assert uncovered("PersonaService", [_table(None, None)], creates) == set()
