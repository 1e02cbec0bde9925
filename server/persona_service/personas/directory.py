"""What other modules may read of personas: the chat partners of a
workspace and their voice, whether a persona still exists. Chat, the
OpenAI-compatible surface and portraits read personas only through this
(never the personas tables)."""

from __future__ import annotations

from persona_service.kernel.api import Work, is_uuid
from persona_service.personas.records import PersonaRecord, PersonaSummary, VoiceRecord
from persona_service.personas.repository import PersonaRepository


class PersonaDirectory:
    def __init__(self, work: Work):
        self._repo = work.of(PersonaRepository)

    def active(self, workspace_id: str, persona_id: str, *, hold: bool = False,
               decides_nothing: bool = False) -> PersonaRecord | None:
        """The persona if it is in the workspace and not deleted, else None. A write of another aggregate that
        decides on it (a chat session, a portrait or a listing made of it) `hold`s it: FOR SHARE until it
        commits, so the persona cannot change or go meanwhile (its readers still can read it). A write that
        reads it and decides again under the hold before it stores anything says `decides_nothing`."""
        return self._repo.active(workspace_id, persona_id, share=hold, decides_nothing=decides_nothing)

    def held(self, workspace_id: str, persona_id: str) -> bool:
        """Whether the persona is in the workspace and not deleted, held as `active(hold=True)` holds it; for a
        write that needs only that (the row is not read)."""
        return self._repo.hold(workspace_id, persona_id)

    def active_list(self, workspace_id: str, limit: int = 1000) -> list[PersonaSummary]:
        """The workspace's personas that are not deleted, newest first (id, org_id, created_at)."""
        return self._repo.active_list(workspace_id, limit)

    def existing(self, persona_ids: list[str]) -> set[str]:
        """Which of these personas exist, deleted ones within their grace included (purged ones do not)."""
        return self._repo.existing(persona_ids) if persona_ids else set()

    def voice(self, persona_id: str, version: int | None = None, *,
              decides_nothing: bool = False) -> VoiceRecord | None:
        """The persona's current voice, or, given a version, that version's
        (a session or model pinned to it); None when it has no such version."""
        return self._at(self._repo.voice(persona_id, decides_nothing=decides_nothing), version, decides_nothing)

    def active_voice(self, workspace_id: str, persona_id: str, version: int | None = None, *,
                     decides_nothing: bool = False) -> VoiceRecord | None:
        """`voice` of a persona `active` finds, without the persona's row: one read where `version` is the current
        one (a chat reply's, which needs of the persona only that it is active and its voice); None when it is
        not active in the workspace or has no such version."""
        current = self._repo.active_voice(workspace_id, persona_id, decides_nothing=decides_nothing)
        return self._at(current, version, decides_nothing)

    def _at(self, current: VoiceRecord | None, version: int | None, decides_nothing: bool) -> VoiceRecord | None:
        """The persona's voice at `version` (None or 0: `current`, its current voice)."""
        if not version or current is None or current.version == version:
            return current
        found = self._repo.version(current.persona_id, version, decides_nothing=decides_nothing)
        return None if found is None else found.voice_record(current)

    def visible(self, workspace_id: str, persona_id: str, *, early: bool = False) -> bool:
        """A persona id the caller may address (for per-persona config); held FOR SHARE in a writing
        transaction (a setting written for it: it cannot be deleted meanwhile), read as is in a read-only one.
        `early`: a write's first look, read as is; the write asks again, held, after it locks its setting."""
        if not is_uuid(persona_id):
            return False
        hold = not early and self._repo.in_writing_transaction()
        return self.active(workspace_id, persona_id, hold=hold, decides_nothing=early) is not None
