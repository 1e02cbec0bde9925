"""A persona's new version and its current voice are one statement (PersonaRepository.add_version: the voice's
upsert a CTE of the version's INSERT; issue 50, two statements before): the rows as the two wrote them."""

from __future__ import annotations

import dataclasses
import uuid

from persona_service.kernel.clock import utcnow
from persona_service.personas.records import NewVersion, VoiceRecord
from persona_service.personas.repository import PersonaRepository, _personas, _versions, _voices
from persona_service.personas.step_records import Dialogue, Soul, Voice
from sqlalchemy import insert, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from test_slug_derivation import persona, recording


def version_and_voice(persona_id: str, version: int, prompt: str) -> tuple[NewVersion, VoiceRecord]:
    now, vector = utcnow(), [0.25, -0.5]
    voice = Voice(prompt, "Hi", (Dialogue("Hello", "Hi"),), "dry")
    return (NewVersion(persona_id=persona_id, version=version, kind="create", soul=Soul("Zq", ""), voice=voice,
                       run_id="", created_at=now, fingerprint=vector, fingerprint_model="local/2", note="",
                       instruction="", source_version=None),
            VoiceRecord(persona_id=persona_id, version=version, system_prompt=prompt, greeting="Hi",
                        sample_dialogues=(Dialogue("Hello", "Hi"),), style_notes="dry", fingerprint=vector,
                        fingerprint_model="local/2", updated_at=now))


def test_a_version_and_its_voice_are_one_statement(engine, tenant):
    statements: list[str] = []
    with engine.connect() as conn:
        conn.begin()
        repo = PersonaRepository(conn)
        row = repo.insert(persona(tenant, "zq" + uuid.uuid4().hex[:8]))
        stop = recording(conn, statements)
        repo.add_version(*version_and_voice(row.id, 1, "first"))
        repo.add_version(*version_and_voice(row.id, 2, "second"))  # the voice replaced
        stop()
        versions = conn.execute(text("SELECT version, voice->>'system_prompt' FROM persona_versions "
                                     "WHERE persona_id = :p ORDER BY version"), {"p": row.id}).all()
        voice = repo.voice(row.id)
        conn.rollback()
    assert len(statements) == 2  # one a version
    assert [tuple(v) for v in versions] == [(1, "first"), (2, "second")]
    assert voice is not None and (voice.version, voice.system_prompt, voice.fingerprint) == (2, "second", [0.25, -0.5])


def test_the_prepared_rows_are_the_ones_core_wrote(engine, tenant):
    """A created persona's row and its version and voice (PersonaRepository's prepared writes, kernel.data.prepared
    `PreparedWrite`) against Core writing the same values: JSON (None as JSON null), the fingerprint, defaults."""
    def values(new) -> dict:  # (a soul, a voice and sample dialogues as the JSON their columns hold)
        def column(value):
            if isinstance(value, Soul | Voice):
                return value.to_json()
            return [{"user": d.user, "persona": d.persona} for d in value] if isinstance(value, tuple) else value
        return {f.name: column(getattr(new, f.name)) for f in dataclasses.fields(new)}

    def rows(conn, persona_id: str) -> list[dict]:
        found = []
        for table, key in ((_personas, _personas.c.id), (_versions, _versions.c.persona_id),
                           (_voices, _voices.c.persona_id)):
            row = conn.execute(table.select().where(key == persona_id)).mappings().one()
            found.append({k: v for k, v in row.items() if k not in ("id", "persona_id", "slug", "root_id")})
        return found

    ours = persona(tenant, "zq" + uuid.uuid4().hex[:8])
    core_id = str(uuid.uuid4())
    core = dataclasses.replace(ours, id=core_id, root_id=core_id, slug="zq" + uuid.uuid4().hex[:8])
    version, voice = version_and_voice(ours.id, 1, "first")
    with engine.connect() as conn:
        conn.begin()
        repo = PersonaRepository(conn)
        made = repo.insert_unless_slug_taken(ours)
        repo.add_version(version, voice)
        conn.execute(pg_insert(_personas).values(**values(core)))
        conn.execute(insert(_versions).values(**values(dataclasses.replace(version, persona_id=core_id))))
        conn.execute(insert(_voices).values(**values(dataclasses.replace(voice, persona_id=core_id))))
        assert made is not None and made == repo.active(tenant.workspace_id, ours.id)
        assert rows(conn, ours.id) == rows(conn, core_id)
        assert conn.execute(text("SELECT jsonb_typeof(card_extra) FROM personas WHERE id = :p"),
                            {"p": ours.id}).scalar() == "null"  # as Core writes None into a JSONB column
        conn.rollback()
