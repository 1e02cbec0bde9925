"""A persona's soul is a `Soul` record above the repository (issue 47): the repository reads the row's JSON into a
`PersonaRow` and hands on its `record()`, and writes a `NewPersona`'s or a `PersonaChanges`' soul as `Soul.to_json`.
The stored JSON is the one rows have always held, byte for byte, and a row stored before the records reads back
and is written again unchanged."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest
from persona_service.kernel.clock import utcnow
from persona_service.personas.records import PersonaChanges, PersonaRow
from persona_service.personas.repository import PersonaRepository, _personas
from persona_service.personas.step_records import Soul
from sqlalchemy import insert, select, text
from test_slug_derivation import persona

ADA = Soul("Ada", "To map every ferry route twice", "Fog", "Grew up on the quay.", ("calm", "exact"), ("care",),
           "Short sentences.")
# How a persona row's soul reads back from PostgreSQL (JSONB: keys by length, then bytewise) ...
READ_BACK = {"fear": "Fog", "name": "Ada", "desire": "To map every ferry route twice", "traits": ["calm", "exact"],
             "values": ["care"], "backstory": "Grew up on the quay.", "speaking_style": "Short sentences."}
# ... and its text, as every row the service wrote before the records holds it (`soul::text`).
STORED_TEXT = ('{"fear": "Fog", "name": "Ada", "desire": "To map every ferry route twice", "traits": ["calm", '
               '"exact"], "values": ["care"], "backstory": "Grew up on the quay.", "speaking_style": "Short sentences."}')


def _old_strings(value) -> list[str]:
    """The strings of a soul read as a dict, as the marketplace's review gathered them before the records."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _old_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _old_strings(v)]
    return []


def test_a_read_back_soul_is_the_record_and_writes_back_the_same_json():
    assert Soul.from_json(READ_BACK) == ADA
    assert json.dumps(ADA.to_json(), sort_keys=True) == json.dumps(READ_BACK, sort_keys=True)
    assert ADA.texts() == _old_strings(READ_BACK)  # a listing review moderates (and a flag keeps) the same text


@pytest.mark.parametrize("planted", [
    {**READ_BACK, "mood": "grim"},  # a key the record does not know: dropped on the way back
    {k: v for k, v in READ_BACK.items() if k != "values"},  # a key missing: written back as []
    {**READ_BACK, "traits": "calm"},  # a string where a list is: read as its letters
])
def test_json_the_record_does_not_hold_does_not_round_trip(planted):
    """The check above would catch a soul the record cannot hold (none is stored: every row was `to_json`'s)."""
    assert json.dumps(Soul.from_json(planted).to_json(), sort_keys=True) != json.dumps(planted, sort_keys=True)


def test_a_caller_soul_is_partial():
    partial = Soul("", "To map every ferry route twice", traits=("calm",))
    assert partial.given() == {"desire": "To map every ferry route twice", "traits": ["calm"]}
    assert not partial.complete and ADA.complete


def _stored(conn, persona_id: str) -> str:
    return conn.execute(text("SELECT soul::text FROM personas WHERE id = :p"), {"p": persona_id}).scalar_one()


def test_the_repository_stores_the_json_rows_hold_and_reads_it_as_a_record(engine, tenant):
    with engine.connect() as conn:
        conn.begin()
        repo = PersonaRepository(conn)
        made = repo.insert(replace(persona(tenant, "zq" + uuid.uuid4().hex[:8]), soul=ADA))
        assert made.soul == ADA and _stored(conn, made.id) == STORED_TEXT
        derived = repo.insert_unless_slug_taken(replace(persona(tenant, "zq" + uuid.uuid4().hex[:8]), soul=ADA))
        assert derived is not None and derived.soul == ADA and _stored(conn, derived.id) == STORED_TEXT
        changed = repo.update(made.id, PersonaChanges(updated_at=utcnow(), soul=replace(ADA, fear="")))
        assert changed.soul.fear == "" and _stored(conn, made.id) == STORED_TEXT.replace('"Fog"', '""')
        conn.rollback()


def test_a_row_stored_before_the_records_reads_and_writes_back_unchanged(engine, tenant):
    """A row as the service wrote it before (its soul the dict `Soul.to_json` gave, through Core): the record's
    soul is its fields, and writing that soul back leaves the stored text as it was."""
    old = replace(persona(tenant, "zq" + uuid.uuid4().hex[:8]), soul=ADA)
    with engine.connect() as conn:
        conn.begin()
        conn.execute(insert(_personas).values({**{name: getattr(old, name) for name in old.__dataclass_fields__},
                                               "soul": json.loads(STORED_TEXT)}))
        before = _stored(conn, old.id)
        repo = PersonaRepository(conn)
        found = repo.get(tenant.workspace_id, old.id)
        assert found is not None and found.soul == ADA
        row = conn.execute(select(_personas).where(_personas.c.id == old.id)).mappings().one()
        assert list(row["soul"].items()) == list(READ_BACK.items())  # (READ_BACK's order: PostgreSQL's)
        assert PersonaRow(**{name: row[name] for name in PersonaRow.__dataclass_fields__}).record() == found
        repo.update(old.id, PersonaChanges(updated_at=utcnow(), soul=found.soul))
        assert _stored(conn, old.id) == before == STORED_TEXT
        conn.rollback()
