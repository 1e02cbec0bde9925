"""What other modules may use of `personas` (its public surface): read-only
lookups (a persona's voice at a pinned version included), the records they return, Character Cards, the service (forks of a
purchased persona) and the text fingerprint moderation keys on. Everything
else in this folder is private to it."""

from persona_service.personas.cards import persona_to_card
from persona_service.personas.directory import PersonaDirectory
from persona_service.personas.generation import fingerprint_text
from persona_service.personas.records import PersonaRecord, PersonaSummary, VoiceRecord
from persona_service.personas.service import PersonaService

__all__ = ["PersonaDirectory", "PersonaRecord", "PersonaService", "PersonaSummary", "VoiceRecord",
           "fingerprint_text", "persona_to_card"]
