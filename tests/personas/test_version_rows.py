"""A persona's new version and its current voice are one statement (PersonaRepository.add_version: the voice's
upsert a CTE of the version's INSERT; issue 50, two statements before): the rows as the two wrote them."""

from __future__ import annotations

import uuid

from persona_service.kernel.clock import utcnow
from persona_service.personas.records import NewVersion, VoiceRecord
from persona_service.personas.repository import PersonaRepository
from sqlalchemy import event, text
from test_slug_derivation import persona


def version_and_voice(persona_id: str, version: int, prompt: str) -> tuple[NewVersion, VoiceRecord]:
    now, vector = utcnow(), [0.25, -0.5]
    voice = {"system_prompt": prompt, "greeting": "Hi", "sample_dialogues": [], "style_notes": "dry"}
    return (NewVersion(persona_id=persona_id, version=version, kind="create", soul={"name": "Zq"}, voice=voice,
                       run_id="", created_at=now, fingerprint=vector, fingerprint_model="local/2", note="",
                       instruction="", source_version=None),
            VoiceRecord(persona_id=persona_id, version=version, system_prompt=prompt, greeting="Hi",
                        sample_dialogues=[], style_notes="dry", fingerprint=vector, fingerprint_model="local/2",
                        updated_at=now))


def test_a_version_and_its_voice_are_one_statement(engine, tenant):
    statements: list[str] = []
    with engine.connect() as conn:
        conn.begin()
        repo = PersonaRepository(conn)
        row = repo.insert(persona(tenant, "zq" + uuid.uuid4().hex[:8]))
        record = lambda *args: statements.append(args[2])  # noqa: E731
        event.listen(conn, "before_cursor_execute", record)
        repo.add_version(*version_and_voice(row.id, 1, "first"))
        repo.add_version(*version_and_voice(row.id, 2, "second"))  # the voice replaced
        event.remove(conn, "before_cursor_execute", record)
        versions = conn.execute(text("SELECT version, voice->>'system_prompt' FROM persona_versions "
                                     "WHERE persona_id = :p ORDER BY version"), {"p": row.id}).all()
        voice = repo.voice(row.id)
        conn.rollback()
    assert len(statements) == 2  # one a version
    assert [tuple(v) for v in versions] == [(1, "first"), (2, "second")]
    assert voice is not None and (voice.version, voice.system_prompt, voice.fingerprint) == (2, "second", [0.25, -0.5])
