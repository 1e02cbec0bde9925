"""Typed records of the personas module: what its repository hands to the
service, the servicer and (through `directory`) other modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class PersonaRecord:
    id: str
    org_id: str
    workspace_id: str
    slug: str
    display_name: str
    visibility: str
    metadata: Any
    intent: str
    soul: dict[str, Any]
    state: str
    state_before_delete: str | None
    version: int
    parent_id: str | None
    root_id: str
    fork_ordinal: int
    fork_note: str
    audit_score: float | None
    flagged_reason: str
    last_run_id: str
    card_extra: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    purge_at: datetime | None
    archived_at: datetime | None


@dataclass(frozen=True, slots=True)
class PersonaSummary:
    """A persona as other modules list it (OpenAI's `/v1/models`)."""

    id: str
    org_id: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class VersionRecord:
    persona_id: str
    version: int
    kind: str
    note: str
    instruction: str
    soul: dict[str, Any]
    voice: dict[str, Any]
    run_id: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class VoiceRecord:
    persona_id: str
    version: int
    system_prompt: str
    greeting: str
    sample_dialogues: list[dict[str, Any]]
    style_notes: str
    fingerprint: list[float]
    fingerprint_model: str
    updated_at: datetime

    def as_output(self) -> dict[str, Any]:
        """The voice as the pipeline's `write_voice` step output."""
        return {
            "system_prompt": self.system_prompt, "greeting": self.greeting,
            "sample_dialogues": list(self.sample_dialogues), "style_notes": self.style_notes,
        }


@dataclass(frozen=True, slots=True)
class StepRecord:
    step: str
    output: Any


@dataclass(frozen=True, slots=True)
class Lineage:
    """A fork tree: its root, children by parent id (fork order), versions
    by persona id, and how many personas it holds."""

    root: PersonaRecord
    children: dict[str, list[PersonaRecord]] = field(default_factory=dict)
    versions: dict[str, list[VersionRecord]] = field(default_factory=dict)
    size: int = 1


@dataclass(frozen=True, slots=True)
class AuditResult:
    persona: PersonaRecord
    score: float
    threshold: float
    provocation_passed: bool
    passed: bool
    notes: str
