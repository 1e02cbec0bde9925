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
        return PersonaService(conn, LocalProvider()).purge_expired(now=utcnow() + timedelta(days=days))


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
