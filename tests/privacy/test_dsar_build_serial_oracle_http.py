"""The build of a member's privacy export (the operators' BuildOneDsarExport) beside the writes of the data it
exports answers as one serial order would (tests/oracle.py), through Envoy: the member's erasure, a PATCH of
their persona, and their next export request. The end state includes what the bundle holds (its tables' row
counts and the persona's name as exported) and the bundles left in storage, so a bundle read across a write
(part before it, part after), or one left behind by an erasure, reads as no serial order's.

BuildOneDsarExport claims the oldest pending export of any organization (the runner's job builds them too, every
30 s), so the build operation calls it until the member's export is built (or nothing is pending): either
builder's bundle counts, as it does for a user."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import pytest
from oracle import ROUNDS, Op, Table, body, check_named, fixture_body, params
from races import reruns
from sqlalchemy import text
from support import wait_until

PAIR_ROUNDS = max(ROUNDS, 3)
BUILD = "/v1/admin/dsar/build-one"


@dataclass(frozen=True)
class Fixture:
    org_id: str
    user_id: str
    auth: dict[str, str]  # the member's key
    admin: dict[str, str]  # a platform administrator's
    persona: str  # the member's


def _fixture(http, engine, tenants, admin) -> Fixture:
    """A member (not the owner, who may not erase) of a new organization with a key and a persona of their own,
    and their pending export."""
    member = tenants.member()
    auth, user_id = member.auth, member.user_id
    # State: one intent in every run (the state reads the persona's name, and the bundle its exported name, which
    # the model derives from it; the generator's is new each time).
    persona = http.post("/v1/personas", headers=auth, json=fixture_body(
        "CreatePersona", state={"intent": "A cartographer of imaginary islands"}))
    assert persona.status_code == 200, persona.text
    requested = http.post("/v1/privacy/exports", json=fixture_body("CreatePrivacyExport"), headers=auth)
    assert requested.status_code == 200, requested.text
    return Fixture(member.org_id, user_id, auth, admin.auth, persona.json()["id"])


def _exports(engine, f: Fixture) -> list[tuple[str, str, str]]:
    """The member's exports: (status, storage key, id), oldest first."""
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT status, storage_key, id FROM privacy_exports WHERE org_id = :o AND user_id = :u"
            " ORDER BY created_at"), {"o": f.org_id, "u": f.user_id})]


def _built(engine, f: Fixture) -> bool:
    """The member's first export is built (or failed, or erased): no builder holds it any more."""
    return all(status not in ("pending", "running") for status, _, _ in _exports(engine, f)[:1])


def _build(http, engine):
    """Build-one until the member's first export is built: another organization's older export may come first, and
    the runner's builder may hold it (build-one then skips it and finds nothing: it waits for that builder)."""
    def call(f: Fixture):
        for _ in range(50):
            built = http.post(BUILD, json=body("BuildOneDsarExport"), headers=f.admin)
            if built.status_code != 200 or _built(engine, f):
                return built
            if not built.json()["handled"]:
                wait_until(lambda: _built(engine, f), what="the member's export built by another builder")
                return built
        raise AssertionError("build-one kept finding work")
    return call


def _ops(http, engine) -> list[Op]:
    return [
        Op("build", _build(http, engine), "BuildOneDsarExport"),
        Op("erase", lambda f: http.delete("/v1/privacy/me", headers=f.auth), "EraseMyData"),
        # Distinguishing: the display name (the state reads it, and the bundle's; the generator's is new each run).
        Op("persona-patch", lambda f: http.patch(f"/v1/personas/{f.persona}", headers=f.auth, json=body(
            "UpdatePersona", distinguishing={"displayName": "Renamed"})), "UpdatePersona"),
        Op("request", lambda f: http.post("/v1/privacy/exports", json=body("CreatePrivacyExport"), headers=f.auth),
           "CreatePrivacyExport"),
    ]


def _bundle(objects: pathlib.Path, key: str):
    """A built bundle's tables (row counts) and the personas' names as exported."""
    data = json.loads((objects / key).read_text())["data"]
    return sorted((table, len(rows)) for table, rows in data.items()), sorted(
        p["display_name"] for p in data.get("personas", []))


def _state(stack, engine, f: Fixture):
    """The member's first export (its status and bundle) and how many they have, the bundles of the organization
    left in storage without their export (an erased one's), and the persona's name."""
    objects = pathlib.Path(stack.settings.data_dir) / "objects"
    exports = _exports(engine, f)
    # (A later export, requested after the first was built, is built by the runner's job when it comes: counted.)
    first = [(status, _bundle(objects, key) if key else None) for status, key, _ in exports[:1]]
    orphans = {p.stem for p in (objects / f.org_id / "privacy").glob("*.json")} - {id_ for _, _, id_ in exports}
    with engine.connect() as conn:
        name = conn.execute(text("SELECT display_name FROM personas WHERE id = :p"), {"p": f.persona}).scalar_one()
    return first, len(exports), len(orphans), name


def _table(stack, http, engine, tenants, admin) -> Table:
    table = Table("a member's pending export, their persona", make=lambda: _fixture(http, engine, tenants, admin),
                  read=lambda f: _state(stack, engine, f), ops=_ops(http, engine))
    build, *writes = table.ops
    table.pairs = [(build, write) for write in writes]  # (the writes among themselves: the privacy and persona tables)
    return table


@pytest.fixture(scope="module")
def admin(tenants):
    return tenants(plan="pro", platform_admin=True)


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None, None, None)))
def test_an_export_built_beside_a_write_of_its_data_answers_as_one_serial_order(
        stack, http, engine, tenants, admin, a, b):
    before = reruns(stack)
    assert check_named(_table(stack, http, engine, tenants, admin), a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"
