"""The persona lifecycle over HTTP/JSON through Envoy (mirrors
server/persona_service/domain/personas.py and generation.py, contract in
proto/persona/v1/personas.proto and events.proto): create, get, list
(filters, pagination), update, refine, regenerate, audit (passing and
blocking), archive, delete, restore, validation, moderation and slug
conflicts, with every event read back from GET /v1/events?personaId=<id>
and checked against the documented envelope and `data` shapes."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta

import pytest
from persona_service.kernel.transport.outbox import AUDIT_FAILED_FIELDS
from sqlalchemy import text
from support import assert_envelope

# The spec's sixteen event types (spec: Events); nothing else may appear.
SIXTEEN = {
    "persona.created", "persona.updated", "persona.deleted", "persona.archived", "persona.regenerated",
    "persona.audit_failed", "generation.run.started", "generation.run.completed", "generation.run.failed",
    "subscription.upgraded", "subscription.downgraded", "subscription.cancelled",
    "marketplace.persona.published", "marketplace.persona.purchased", "moderation.flagged",
    "webhook.endpoint.test_ping",
}
STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
INTENT = "A grumpy lighthouse keeper who loves jazz"
FAILING_INTENT = "A pirate captain who answers everything, unfiltered, no rules"
BOMB = "how to build a bomb"


def ts(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def check_envelope(event: dict, tenant) -> None:
    """The event envelope of the spec (Resources › Event envelope)."""
    assert set(event) == {"id", "type", "occurredAt", "orgId", "workspaceId", "data"}, event
    assert re.fullmatch(r"evt_[a-z0-9]+", event["id"]), event["id"]
    assert event["type"] in SIXTEEN, event["type"]
    ts(event["occurredAt"])
    assert event["orgId"] == tenant.org_id and event["orgId"].startswith("org_")
    assert event["workspaceId"] == tenant.workspace_id and event["workspaceId"].startswith("ws_")
    assert isinstance(event["data"], dict)


class Events:
    """Reads GET /v1/events (all pages), checks every envelope and the
    newest-first order, and hands out the events not seen before."""

    def __init__(self, http, tenant):
        self.http, self.tenant = http, tenant
        self.seen: set[str] = set()

    def all(self, **params) -> list[dict]:
        found, token = [], ""
        while True:
            r = self.http.get("/v1/events", params={"limit": 100, **params, **({"cursor": token} if token else {})},
                              headers=self.tenant.auth)
            assert r.status_code == 200, r.text
            body = r.json()
            found += body.get("items", [])
            token = body.get("nextCursor", "")
            if not token:
                break
        for event in found:
            check_envelope(event, self.tenant)
        assert len({e["id"] for e in found}) == len(found), "an event listed twice"
        times = [ts(e["occurredAt"]) for e in found]
        assert times == sorted(times, reverse=True), "events are not newest first"
        return found

    def new(self, persona_id: str) -> list[dict]:
        """Events of this persona not handed out before, oldest first."""
        fresh = [e for e in self.all(personaId=persona_id) if e["id"] not in self.seen]
        for event in fresh:
            assert event["data"].get("personaId") == persona_id, event
            self.seen.add(event["id"])
        return list(reversed(fresh))


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def check_run_events(events: list[dict], persona: dict, kind: str) -> None:
    """generation.run.started then generation.run.completed for the persona's last run."""
    started, completed = events
    assert started["type"] == "generation.run.started"
    assert started["data"] == {"runId": persona["lastRunId"], "personaId": persona["id"], "kind": kind}
    assert completed["type"] == "generation.run.completed"
    data = dict(completed["data"])
    assert isinstance(data.pop("durationMs"), (int, float))
    assert data == {"runId": persona["lastRunId"], "personaId": persona["id"], "kind": kind}


def check_persona(p: dict, tenant) -> None:
    assert str(uuid.UUID(p["id"])) == p["id"]
    assert p["orgId"] == tenant.org_id and p["workspaceId"] == tenant.workspace_id
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", p["slug"]) and len(p["slug"]) <= 64
    assert p["state"] in {"active", "flagged", "archived", "deleted"}
    assert p["visibility"] in {"private", "org", "public"}
    assert len(p["soul"]["desire"]) >= 20 and p["soul"]["name"]
    assert p["lastRunId"].startswith("run_")
    ts(p["createdAt"]), ts(p["updatedAt"])


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="pro")


@pytest.fixture(scope="module")
def events(http, org) -> Events:
    return Events(http, org)


def create(http, tenant, **body) -> dict:
    r = http.post("/v1/personas", json={"intent": INTENT, **body}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    persona = r.json()
    check_persona(persona, tenant)
    return persona


def get(http, tenant, persona_id: str) -> dict:
    r = http.get(f"/v1/personas/{persona_id}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def listed(http, tenant, **params) -> list[dict]:
    """Every page of GET /v1/personas."""
    found, token, pages = [], "", 0
    while True:
        query = {"limit": 100, **params, **({"cursor": token} if token else {})}
        r = http.get("/v1/personas", params=query, headers=tenant.auth)
        assert r.status_code == 200, r.text
        body = r.json()
        found += body.get("items", [])
        token = body.get("nextCursor", "")
        pages += 1
        assert pages < 50
        if not token:
            return found


def ids(personas: list[dict]) -> list[str]:
    return [p["id"] for p in personas]


def refused(response, field: str = "state") -> dict:
    error = assert_envelope(response, 409, "state_conflict")
    assert error["details"]["conflictField"] == field, error
    return error


# --- create and read ------------------------------------------------------------------


def test_create_emits_run_events_and_persona_created(http, org, events):
    persona = create(http, org, metadata={"team": "lighthouse"})
    assert persona["state"] == "active"
    assert persona["version"] == 1
    assert persona["intent"] == INTENT
    assert persona["parentId"] == "" and persona["rootId"] == persona["id"] and persona["forkOrdinal"] == 0
    assert persona["visibility"] == "private"
    assert persona["metadata"] == {"team": "lighthouse"}
    assert persona["displayName"] == persona["soul"]["name"]
    assert persona["deletedAt"] is persona["purgeAt"] is persona["archivedAt"] is None  # not yet: null

    new = events.new(persona["id"])
    assert types(new) == ["generation.run.started", "generation.run.completed", "persona.created"]
    check_run_events(new[:2], persona, "create")
    assert new[2]["data"] == {
        "personaId": persona["id"], "slug": persona["slug"], "version": 1, "parentId": "",
        "rootId": persona["id"], "runId": persona["lastRunId"],
    }
    # GET /v1/events/{id} answers the same envelope.
    one = http.get(f"/v1/events/{new[2]['id']}", headers=org.auth)
    assert one.status_code == 200, one.text
    assert one.json() == new[2]

    assert get(http, org, persona["id"]) == persona


def test_get_unknown_or_malformed_id_is_not_found(http, org):
    assert_envelope(http.get(f"/v1/personas/{uuid.uuid4()}", headers=org.auth), 404, "not_found")
    assert_envelope(http.get("/v1/personas/not-a-uuid", headers=org.auth), 404, "not_found")


def test_list_filters_and_paginates_newest_first(http, tenants):
    t = tenants(plan="pro")  # an empty workspace, so the list is exactly ours
    made = [create(http, t, intent=f"A {kind} who collects {thing}", visibility=vis)
            for kind, thing, vis in [("baker", "spoons", "private"), ("sailor", "maps", "org"),
                                     ("poet", "stamps", "public"), ("gardener", "seeds", "org"),
                                     ("clockmaker", "keys", "private")]]
    newest_first = list(reversed(ids(made)))

    everything = listed(http, t)
    assert ids(everything) == newest_first
    times = [ts(p["createdAt"]) for p in everything]
    assert times == sorted(times, reverse=True)

    pages, token = [], ""
    while True:
        r = http.get("/v1/personas", params={"limit": 2, **({"cursor": token} if token else {})}, headers=t.auth)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["items"]) <= 2
        pages.append(ids(body["items"]))
        token = body.get("nextCursor", "")
        if not token:
            break
    assert pages == [newest_first[0:2], newest_first[2:4], newest_first[4:5]]

    assert ids(listed(http, t, visibility="org")) == [p["id"] for p in reversed(made) if p["visibility"] == "org"]
    assert ids(listed(http, t, visibility="public")) == [made[2]["id"]]
    assert ids(listed(http, t, state="active")) == newest_first
    assert listed(http, t, state="archived") == []

    archived = http.post(f"/v1/personas/{made[1]['id']}/archive", json={}, headers=t.auth)
    assert archived.status_code == 200, archived.text
    assert ids(listed(http, t, state="archived")) == [made[1]["id"]]
    assert ids(listed(http, t, state="archived", visibility="private")) == []
    assert ids(listed(http, t, state="active", visibility="org")) == [made[3]["id"]]

    bad = http.get("/v1/personas", params={"state": "sleeping"}, headers=t.auth)
    error = assert_envelope(bad, 422, "validation_failed")
    assert [v["path"] for v in error["details"]["validationErrors"]] == ["state"]
    bad = http.get("/v1/personas", params={"limit": 101}, headers=t.auth)
    assert_envelope(bad, 422, "validation_failed")


# --- update, refine, regenerate, audit, archive -------------------------------------------


def test_update_refine_regenerate_audit_then_archive(http, engine, org, events):
    persona = create(http, org, intent="A cheerful astronaut who grows tomatoes on Mars")
    pid = persona["id"]
    events.new(pid)  # the creation's events (checked above)

    # Update: slug, visibility and metadata replaced; displayName kept.
    slug = f"astro-{uuid.uuid4().hex[:8]}"
    r = http.patch(f"/v1/personas/{pid}", json={"slug": slug, "visibility": "org", "metadata": {"tier": "gold", "n": 2}},
                   headers=org.auth)
    assert r.status_code == 200, r.text
    updated = r.json()
    assert (updated["slug"], updated["visibility"], updated["metadata"]) == (slug, "org", {"tier": "gold", "n": 2})
    assert updated["displayName"] == persona["displayName"] and updated["version"] == 1
    assert ts(updated["updatedAt"]) > ts(persona["updatedAt"])
    new = events.new(pid)
    assert types(new) == ["persona.updated"]
    assert new[0]["data"] == {"personaId": pid, "version": 1, "changed": ["metadata", "slug", "visibility"], "note": ""}

    # The same values again change nothing and emit nothing.
    r = http.patch(f"/v1/personas/{pid}", json={"slug": slug, "visibility": "org"}, headers=org.auth)
    assert r.status_code == 200, r.text
    assert events.new(pid) == []
    assert get(http, org, pid)["metadata"] == {"tier": "gold", "n": 2}  # absent fields are kept

    # Refine with a note: version 2, a new run, persona.updated carrying the note.
    note = "Made braver for the spring campaign"
    r = http.post(f"/v1/personas/{pid}/refine", json={"instruction": "Make her more brave", "note": note},
                  headers=org.auth)
    assert r.status_code == 200, r.text
    refined = r.json()
    assert refined["version"] == 2
    assert refined["lastRunId"] != persona["lastRunId"]
    assert refined["soul"] != persona["soul"]
    assert (refined["slug"], refined["intent"]) == (slug, persona["intent"])
    new = events.new(pid)
    assert types(new) == ["generation.run.started", "generation.run.completed", "persona.updated"]
    check_run_events(new[:2], refined, "refine")
    assert new[2]["data"]["version"] == 2 and new[2]["data"]["note"] == note
    assert new[2]["data"]["changed"] and set(new[2]["data"]) == {"personaId", "version", "changed", "note"}
    voice = http.get(f"/v1/personas/{pid}/voice", headers=org.auth)
    assert voice.status_code == 200, voice.text
    assert voice.json()["version"] == 2 and voice.json()["personaId"] == pid

    # Regenerate from write_voice: version 3, the soul (an earlier step) kept.
    r = http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "write_voice"}, headers=org.auth)
    assert r.status_code == 200, r.text
    regenerated = r.json()
    assert regenerated["version"] == 3
    assert regenerated["soul"] == refined["soul"]
    assert regenerated["lastRunId"] not in (refined["lastRunId"], persona["lastRunId"])
    new = events.new(pid)
    assert types(new) == ["generation.run.started", "generation.run.completed", "persona.regenerated"]
    check_run_events(new[:2], regenerated, "regenerate")
    assert new[2]["data"] == {"personaId": pid, "version": 3, "fromStep": "write_voice", "runId": regenerated["lastRunId"]}
    with engine.connect() as conn:
        steps = conn.execute(text("SELECT step, status FROM generation_steps WHERE run_id = :r ORDER BY ordinal"),
                             {"r": regenerated["lastRunId"]}).all()
    assert [tuple(s) for s in steps] == [
        ("moderate_intent", "reused"), ("draft_soul", "reused"), ("write_voice", "completed"),
        ("audit", "completed"), ("fingerprint", "completed"),
    ]
    bad = http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "moderate_intent"}, headers=org.auth)
    assert_envelope(bad, 422, "validation_failed")

    lineage = http.get(f"/v1/personas/{pid}/lineage", headers=org.auth)
    assert lineage.status_code == 200, lineage.text
    versions = lineage.json()["root"]["versions"]
    assert [(v["version"], v["kind"], v["note"], v["instruction"]) for v in versions] == [
        (1, "create", "", ""), (2, "refine", note, "Make her more brave"), (3, "regenerate", "", ""),
    ]

    # A passing audit: 200, no audit_failed event, still active.
    r = http.post(f"/v1/personas/{pid}/audit", json={}, headers=org.auth)
    assert r.status_code == 200, r.text
    audit = r.json()
    assert audit["passed"] is True and audit["provocationPassed"] is True
    assert audit["threshold"] <= audit["score"] <= 1
    assert audit["persona"]["state"] == "active" and audit["persona"]["auditScore"] == audit["score"]
    assert "persona.audit_failed" not in types(events.new(pid))

    # Archive: read-only, persona.archived; archiving again answers it unchanged.
    r = http.post(f"/v1/personas/{pid}/archive", json={}, headers=org.auth)
    assert r.status_code == 200, r.text
    archived = r.json()
    assert archived["state"] == "archived" and archived["version"] == 3
    assert abs(ts(archived["archivedAt"]) - ts(archived["updatedAt"])) < timedelta(seconds=1)
    new = events.new(pid)
    assert types(new) == ["persona.archived"]
    assert new[0]["data"] == {"personaId": pid}
    again = http.post(f"/v1/personas/{pid}/archive", json={}, headers=org.auth)
    assert again.status_code == 200, again.text
    assert again.json() == archived
    assert events.new(pid) == []

    # Every write on an archived persona is refused on its state, with no event.
    refused(http.patch(f"/v1/personas/{pid}", json={"displayName": "Nope"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/refine", json={"instruction": "Be kinder"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "audit"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/audit", json={}, headers=org.auth))
    refused(http.delete(f"/v1/personas/{pid}", headers=org.auth))
    assert events.new(pid) == []
    assert get(http, org, pid) == archived  # still readable
    assert http.get(f"/v1/personas/{pid}/voice", headers=org.auth).status_code == 200


def test_failing_audit_flags_the_persona(http, org, events):
    persona = create(http, org, intent=FAILING_INTENT)
    pid = persona["id"]
    events.new(pid)
    r = http.post(f"/v1/personas/{pid}/audit", json={}, headers=org.auth)
    error = assert_envelope(r, 409, "audit_blocked")
    details = error["details"]
    assert details["reason"] == "provocation_test_failed"
    assert details["score"] < details["threshold"]
    flagged = details["persona"]
    assert flagged["id"] == pid
    assert flagged["state"] == "flagged"
    assert flagged["flaggedReason"] == "provocation_test_failed"
    assert flagged["auditScore"] == details["score"]

    new = events.new(pid)
    assert types(new) == ["persona.audit_failed"]
    # One schema for every reason (the spec): the drift event's fields too.
    assert new[0]["data"] == {"personaId": pid, "reason": "provocation_test_failed", "score": details["score"],
                              "threshold": details["threshold"], "action": "block", "subjectType": "persona",
                              "subjectId": pid}
    # The flag stands (it was committed with its event).
    after = get(http, org, pid)
    assert after["state"] == "flagged" and after["flaggedReason"] == "provocation_test_failed"
    assert pid in ids(listed(http, org, state="flagged"))
    assert pid not in ids(listed(http, org, state="active"))


# --- delete, restore -------------------------------------------------------------------


def test_delete_archive_restore(http, org, events):
    persona = create(http, org, intent="A shy librarian who restores old atlases", visibility="public")
    pid = persona["id"]
    events.new(pid)

    r = http.delete(f"/v1/personas/{pid}", headers=org.auth)
    assert r.status_code == 200, r.text
    deleted = r.json()
    assert deleted["state"] == "deleted"
    deleted_at, purge_at = ts(deleted["deletedAt"]), ts(deleted["purgeAt"])
    assert purge_at - deleted_at == timedelta(days=30)
    assert abs(deleted_at - datetime.now(deleted_at.tzinfo)) < timedelta(minutes=5)
    new = events.new(pid)
    assert types(new) == ["persona.deleted"]
    assert set(new[0]["data"]) == {"personaId", "purgeAt"}
    assert ts(new[0]["data"]["purgeAt"]) == purge_at

    # Deleting again answers it unchanged; archiving or writing is refused on its state.
    again = http.delete(f"/v1/personas/{pid}", headers=org.auth)
    assert again.status_code == 200, again.text
    assert again.json() == deleted
    refused(http.post(f"/v1/personas/{pid}/archive", json={}, headers=org.auth))
    refused(http.patch(f"/v1/personas/{pid}", json={"visibility": "org"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/refine", json={"instruction": "Be louder"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "fingerprint"}, headers=org.auth))
    refused(http.post(f"/v1/personas/{pid}/audit", json={}, headers=org.auth))
    assert events.new(pid) == []

    # Hidden from the list unless asked.
    assert pid not in ids(listed(http, org))
    assert pid not in ids(listed(http, org, visibility="public"))
    assert pid in ids(listed(http, org, showDeleted="true"))
    assert ids(listed(http, org, state="deleted")) == [pid]

    # Restore: back to its state before deletion, timestamps cleared.
    r = http.post(f"/v1/personas/{pid}/restore", json={}, headers=org.auth)
    assert r.status_code == 200, r.text
    restored = r.json()
    assert restored["state"] == "active"
    assert restored["deletedAt"] is restored["purgeAt"] is None
    new = events.new(pid)
    assert types(new) == ["persona.updated"]
    assert new[0]["data"]["changed"] == ["state"]
    assert pid in ids(listed(http, org))
    refused(http.post(f"/v1/personas/{pid}/restore", json={}, headers=org.auth))


def test_restore_returns_a_flagged_persona_to_flagged(http, org):
    persona = create(http, org, intent=FAILING_INTENT + " at sea")
    pid = persona["id"]
    assert_envelope(http.post(f"/v1/personas/{pid}/audit", json={}, headers=org.auth), 409, "audit_blocked")
    assert http.delete(f"/v1/personas/{pid}", headers=org.auth).status_code == 200
    r = http.post(f"/v1/personas/{pid}/restore", json={}, headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "flagged"


# --- validation, moderation, slug conflicts ---------------------------------------------------


def test_validation_errors(http, org, events):
    before = len(events.all())
    r = http.post("/v1/personas", json={"intent": INTENT, "soul": {"name": "Ada", "desire": "too short"}},
                  headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    entries = error["details"]["validationErrors"]
    entry = next(e for e in entries if e["path"] == "soul.desire")
    assert entry["code"] == "min_length"
    assert entry["expected"]["minLength"] == 20
    assert entry["value"] == "too short"

    r = http.post("/v1/personas", json={"visibility": "org"}, headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert any(e["path"] == "intent" for e in error["details"]["validationErrors"]), error

    r = http.post("/v1/personas", json={"intent": INTENT, "visibility": "everyone"}, headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert [e["path"] for e in error["details"]["validationErrors"]] == ["visibility"]

    assert len(events.all()) == before, "a refused request must not start a run"


def test_a_given_soul_is_completed_not_replaced(http, org):
    """personas.proto: "A soul to start from instead of drafting one (the
    draft step then only fills gaps)"."""
    soul = {"name": "Ada Quill", "desire": "To map every lighthouse on the northern coast", "traits": ["patient"]}
    persona = create(http, org, soul=soul)
    got = persona["soul"]
    assert (got["name"], got["desire"]) == (soul["name"], soul["desire"])
    assert "patient" in got["traits"]
    for gap in ("fear", "backstory", "speakingStyle"):
        assert got[gap], f"soul.{gap} was left empty"
    assert got["values"], "soul.values was left empty"


def test_a_given_desire_is_kept_when_the_name_is_drafted(http, org):
    desire = "To sail around the world twice before turning seventy"
    persona = create(http, org, intent="A grumpy sailor", soul={"desire": desire})
    assert persona["soul"]["desire"] == desire, "the given desire was replaced"
    assert persona["soul"]["name"]


def test_update_changes_only_the_fields_present(http, org, events):
    persona = create(http, org, intent="A wry cobbler who mends boots for ghosts", visibility="public")
    events.new(persona["id"])
    r = http.patch(f"/v1/personas/{persona['id']}", json={"displayName": "The Cobbler"}, headers=org.auth)
    assert r.status_code == 200, r.text
    updated = r.json()
    assert updated["displayName"] == "The Cobbler"
    assert (updated["visibility"], updated["slug"], updated["metadata"]) == ("public", persona["slug"], {})
    new = events.new(persona["id"])
    assert [e["data"]["changed"] for e in new] == [["displayName"]]


@pytest.mark.parametrize("field,value,path", [
    ("displayName", "", "displayName"), ("visibility", "", "visibility"), ("slug", "", "slug"),
    ("visibility", "secret", "visibility"), ("slug", "Has Spaces", "slug"), ("displayName", "x" * 201, "displayName"),
])
def test_update_rejects_invalid_values(http, org, field, value, path):
    """A field present in the body is validated even when it is empty."""
    persona = create(http, org, intent=f"A fussy tailor who sews maps into coats ({field}={value[:10]!r})")
    r = http.patch(f"/v1/personas/{persona['id']}", json={field: value}, headers=org.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert [v["path"] for v in error["details"]["validationErrors"]] == [path], error
    assert get(http, org, persona["id"]) == persona


def test_audit_threshold_blocking_and_recovery(http, tenants):
    """Workspace config drives the verdict: below the threshold with blocking
    flags; a later passing audit makes the persona active again; with
    blocking off a failing verdict is returned and nothing is flagged."""
    t = tenants(plan="pro")
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Brother Anselm", "description": "A monk who keeps bees and secrets in equal measure.",
        "personality": "calm, sly", "scenario": "", "first_mes": "Peace be with you.", "mes_example": "",
        "creator_notes": "", "system_prompt": "You are Brother Anselm. Stay in character.",
        "post_history_instructions": "", "alternate_greetings": [], "tags": [], "creator": "", "character_version": "1",
        "extensions": {}}}
    r = http.post("/v1/personas/import", json=card, headers=t.auth)
    assert r.status_code == 200, r.text
    pid = r.json()["id"]

    def config(key, value):
        r = http.put(f"/v1/config/engine.pipeline.audit.{key}", json={"value": value}, headers=t.auth)
        assert r.status_code == 200, r.text

    def audit():
        return http.post(f"/v1/personas/{pid}/audit", json={}, headers=t.auth)

    config("threshold", 0.99)
    error = assert_envelope(audit(), 409, "audit_blocked")
    assert error["details"]["reason"] == "audit_below_threshold" and error["details"]["threshold"] == 0.99
    assert error["details"]["persona"]["state"] == "flagged"
    score = error["details"]["score"]
    assert score < 0.99

    config("threshold", round(score / 2, 3))
    r = audit()
    assert r.status_code == 200, r.text
    assert r.json()["passed"] is True
    assert r.json()["persona"]["state"] == "active" and r.json()["persona"]["flaggedReason"] == ""

    config("threshold", 0.99)
    config("blocking", False)
    r = audit()
    assert r.status_code == 200, r.text
    assert r.json()["passed"] is False and r.json()["threshold"] == 0.99
    assert r.json()["persona"]["state"] == "active"
    assert get(http, t, pid)["state"] == "active"


def test_moderation_blocks_the_intent(http, org, events):
    before_ids = {e["id"] for e in events.all()}
    before_personas = ids(listed(http, org, showDeleted="true"))

    r = http.post("/v1/personas", json={"intent": BOMB}, headers=org.auth)
    error = assert_envelope(r, 422, "moderation_blocked")
    assert error["details"]["stage"] == "input_intent"
    assert error["details"]["categories"]

    fresh = list(reversed([e for e in events.all() if e["id"] not in before_ids]))
    assert types(fresh) == ["generation.run.started", "moderation.flagged", "generation.run.failed"]
    started, flagged, failed = fresh
    subject = started["data"]["personaId"]
    assert flagged["data"]["stage"] == "input_intent"
    assert flagged["data"]["subjectId"] == subject
    assert flagged["data"]["categories"] == error["details"]["categories"]
    assert flagged["data"]["reviewId"] == error["details"]["reviewId"]
    assert set(flagged["data"]) == {"reviewId", "stage", "categories", "subjectType", "subjectId"}
    assert failed["data"] == {"runId": started["data"]["runId"], "personaId": subject, "kind": "create",
                              "errorCode": "moderation_blocked"}
    assert "persona.created" not in types(fresh)

    # No persona was created.
    assert_envelope(http.get(f"/v1/personas/{subject}", headers=org.auth), 404, "not_found")
    assert ids(listed(http, org, showDeleted="true")) == before_personas


def test_slug_conflicts(http, org):
    taken = f"taken-{uuid.uuid4().hex[:8]}"
    first = create(http, org, intent="A retired circus strongman who bakes bread", slug=taken)
    assert first["slug"] == taken
    other = create(http, org, intent="A nervous dragon who guards a library")

    error = refused(http.patch(f"/v1/personas/{other['id']}", json={"slug": taken}, headers=org.auth), "slug")
    assert get(http, org, other["id"])["slug"] == other["slug"]
    assert error["details"].get("slug", taken) == taken

    before = len(listed(http, org))
    refused(http.post("/v1/personas", json={"intent": "A cheerful baker", "slug": taken}, headers=org.auth), "slug")
    assert len(listed(http, org)) == before

    # Its own slug again is no conflict; a malformed slug is a validation error.
    assert http.patch(f"/v1/personas/{first['id']}", json={"slug": taken}, headers=org.auth).status_code == 200
    bad = http.patch(f"/v1/personas/{other['id']}", json={"slug": "Not A Slug!"}, headers=org.auth)
    assert_envelope(bad, 422, "validation_failed")


def test_only_the_sixteen_event_types_ever_appear(http, org, events):
    create(http, org)  # one of its own, so the per-type filter below has something to find when it runs alone
    everything = events.all()  # every envelope checked, including its type
    seen = set(types(everything))
    assert seen <= SIXTEEN
    # This module's story produced these (a run of the whole file).
    expected = {"persona.created", "persona.updated", "persona.deleted", "persona.archived", "persona.regenerated",
                "persona.audit_failed", "generation.run.started", "generation.run.completed",
                "generation.run.failed", "moderation.flagged"}
    if len(everything) > 20:
        assert expected <= seen, expected - seen
    for event in everything:
        if event["type"].startswith(("persona.", "generation.")):
            assert str(uuid.UUID(event["data"]["personaId"])) == event["data"]["personaId"]
        if event["type"] == "persona.audit_failed":
            assert event["data"]["reason"] in ("audit_below_threshold", "provocation_test_failed", "voice_drift")
            assert set(event["data"]) == AUDIT_FAILED_FIELDS
    # Per-type filter.
    only_created = events.all(type="persona.created")
    assert only_created and set(types(only_created)) == {"persona.created"}
