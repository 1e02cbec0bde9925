"""The scheduled purge of soft-deleted personas (mirrors
PersonaService.purge_expired in server/persona_service/domain/personas.py),
driven with an injected clock on the real database: a persona deleted now is
kept through its 30-day grace and purged after it; others are never touched.

Note: like the real job, a purge at +31 days removes every soft-deleted
persona of the shared stack whose grace ran out by then."""

from __future__ import annotations

from datetime import timedelta

import pytest
from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.work import Work
from persona_service.personas.module import purge as purge_job
from persona_service.personas.service import PersonaService
from persona_service.providers.local import LocalProvider
from sqlalchemy import text
from support import assert_envelope


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="pro")


def create(http, tenant, intent: str) -> dict:
    r = http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def purge(engine, days: float) -> list[str]:
    with engine.begin() as conn:
        return PersonaService(Work.on(conn), LocalProvider()).purge_expired(now=utcnow() + timedelta(days=days))


def listed_ids(http, tenant) -> set[str]:
    r = http.get("/v1/personas", params={"showDeleted": "true", "limit": 100}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return {p["id"] for p in r.json()["items"]}


def rows(engine, table: str, column: str, persona_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT count(*) FROM {table} WHERE {column} = :p"), {"p": persona_id}).scalar_one()


def test_purge_respects_the_grace_period(http, engine, org):
    doomed = create(http, org, "A tired night-shift baker who loves crosswords")
    kept = create(http, org, "A cheerful ferry captain who knows every gull")
    archived = create(http, org, "A stern museum guard who hums opera")
    assert http.post(f"/v1/personas/{archived['id']}/archive", json={}, headers=org.auth).status_code == 200
    r = http.delete(f"/v1/personas/{doomed['id']}", headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "deleted"

    # Within the grace: nothing of ours is purged, the deleted persona is still restorable data.
    purged = purge(engine, 29)
    assert not {doomed["id"], kept["id"], archived["id"]} & set(purged)
    assert {doomed["id"], kept["id"], archived["id"]} <= listed_ids(http, org)
    assert http.get(f"/v1/personas/{doomed['id']}", headers=org.auth).status_code == 200

    # Past the grace: the deleted persona is gone for good, the others stay.
    purged = purge(engine, 31)
    assert doomed["id"] in purged
    assert kept["id"] not in purged and archived["id"] not in purged
    assert_envelope(http.get(f"/v1/personas/{doomed['id']}", headers=org.auth), 404, "not_found")
    assert_envelope(http.post(f"/v1/personas/{doomed['id']}/restore", json={}, headers=org.auth), 404, "not_found")
    ids = listed_ids(http, org)
    assert doomed["id"] not in ids and {kept["id"], archived["id"]} <= ids
    assert rows(engine, "personas", "id", doomed["id"]) == 0
    assert rows(engine, "voice_profiles", "persona_id", doomed["id"]) == 0
    assert rows(engine, "persona_versions", "persona_id", doomed["id"]) == 0
    for survivor, state in ((kept, "active"), (archived, "archived")):
        r = http.get(f"/v1/personas/{survivor['id']}", headers=org.auth)
        assert r.status_code == 200, r.text
        assert r.json()["state"] == state

    # A second run finds nothing more of ours.
    assert doomed["id"] not in purge(engine, 31)


def test_forks_of_a_purged_root_keep_a_readable_lineage(http, engine, org):
    """Purging a deleted root must not break its surviving forks: their
    lineage is still answered (no 500), and contains them."""
    root = create(http, org, "A gloomy astronomer who names every comet")
    r = http.post(f"/v1/personas/{root['id']}/fork", json={"note": "survivor"}, headers=org.auth)
    assert r.status_code == 200, r.text
    fork = r.json()
    assert http.delete(f"/v1/personas/{root['id']}", headers=org.auth).status_code == 200
    assert root["id"] in purge(engine, 31)

    r = http.get(f"/v1/personas/{fork['id']}", headers=org.auth)
    assert r.status_code == 200, r.text
    r = http.get(f"/v1/personas/{fork['id']}/lineage", headers=org.auth)
    assert r.status_code == 200, r.text
    lineage = r.json()

    def walk(node):
        yield node
        for child in node.get("children", []):
            yield from walk(child)

    nodes = {n["personaId"]: n for n in walk(lineage["root"])}
    assert fork["id"] in nodes and root["id"] not in nodes
    assert lineage["size"] == len(nodes)


def test_the_job_purges_in_batches_everything_due_and_nothing_else(http, engine, org):
    """The job's purge deletes a batch per transaction until a batch comes
    back short: every persona due goes, across several batches of at most
    `batch`; the active ones and a deleted one still in its grace stay."""
    made = [create(http, org, f"A patient lighthouse keeper, number {i}, who logs every storm") for i in range(7)]
    for persona in made[:6]:
        assert http.delete(f"/v1/personas/{persona['id']}", headers=org.auth).status_code == 200
    later = made[5]["id"]  # deleted later: still in its grace at the purge's time
    with engine.begin() as conn:
        conn.execute(text("UPDATE personas SET purge_at = now() + interval '60 days' WHERE id = :p"), {"p": later})
    now = utcnow() + timedelta(days=31)
    due = "state = 'deleted' AND purge_at <= :now"
    with engine.connect() as conn:
        due_ids = set(conn.execute(text(f"SELECT id FROM personas WHERE {due}"), {"now": now}).scalars())
        others = set(conn.execute(text(f"SELECT id FROM personas WHERE NOT ({due})"), {"now": now}).scalars())
    assert {p["id"] for p in made[:5]} <= due_ids and {later, made[6]["id"]} <= others

    batches = purge_job(engine, LocalProvider(), now=now, batch=2)
    assert sum(batches) == len(due_ids) and len(batches) >= 3, batches
    assert all(n == 2 for n in batches[:-1]) and batches[-1] < 2, batches
    with engine.connect() as conn:
        assert set(conn.execute(text("SELECT id FROM personas")).scalars()) == others
