"""A chat reply's reads of its persona and voice, and its hold on the persona, run prepared
(personas/repository.py, issue 50: no SQLAlchemy layers per execution): they return the very records the same
reads through Core return, and nothing (no hold) for a deleted persona or another workspace's."""

from __future__ import annotations

from persona_service.kernel.api import record_or_none
from persona_service.personas import repository
from persona_service.personas.records import PersonaRow, VoiceRow
from persona_service.personas.repository import PersonaRepository
from sqlalchemy import event, select


def test_the_prepared_reads_return_what_core_reads(http, engine, tenant):
    persona_id = http.post("/v1/personas", json={"intent": "A lighthouse keeper who paints gulls"},
                           headers=tenant.auth).json()["id"]
    personas, voices = repository._personas, repository._voices
    statements: list[str] = []
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        repo = PersonaRepository(conn)
        persona = repo.active(tenant.workspace_id, persona_id, decides_nothing=True)
        voice = repo.voice(persona_id, decides_nothing=True)
        assert repo.hold(tenant.workspace_id, persona_id)  # FOR SHARE, as a reply is stored
        assert statements == []  # none went through SQLAlchemy
        core_persona = record_or_none(PersonaRow, conn.execute(
            select(personas).where(personas.c.id == persona_id)).mappings().first())
        core_voice = record_or_none(VoiceRow, conn.execute(
            select(voices).where(voices.c.persona_id == persona_id)).mappings().first())
        assert persona is not None and voice is not None
        assert core_persona is not None and core_voice is not None
        assert persona == core_persona.record() and voice == core_voice.record()
        assert len(voice.fingerprint) > 0 and isinstance(voice.fingerprint[0], float)
        assert repo.active("another-workspace", persona_id) is None
        conn.execute(personas.update().where(personas.c.id == persona_id).values(state="deleted"))
        assert repo.active(tenant.workspace_id, persona_id) is None
        assert not repo.hold(tenant.workspace_id, persona_id)
        conn.rollback()
