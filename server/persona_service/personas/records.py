"""Typed records of the personas module: what its repository hands to the
service, the servicer and (through `directory`) other modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from persona_service.personas.step_records import Dialogue, Soul, StepOutput, Voice


@dataclass(frozen=True, slots=True)
class PersonaRow:
    """A persona as its row holds it (the soul: a JSON column); the repository hands on `record()`."""

    id: str
    org_id: str
    workspace_id: str
    slug: str
    display_name: str
    visibility: str
    metadata: dict[str, object]
    intent: str
    soul: dict[str, object]
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
    card_extra: dict[str, object] | None
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    purge_at: datetime | None
    archived_at: datetime | None

    def record(self) -> PersonaRecord:
        return PersonaRecord(
            self.id, self.org_id, self.workspace_id, self.slug, self.display_name, self.visibility, self.metadata,
            self.intent, Soul.from_json(self.soul), self.state, self.state_before_delete, self.version,
            self.parent_id, self.root_id, self.fork_ordinal, self.fork_note, self.audit_score, self.flagged_reason,
            self.last_run_id, self.card_extra, self.created_at, self.updated_at, self.deleted_at, self.purge_at,
            self.archived_at,
        )


@dataclass(frozen=True, slots=True)
class PersonaRecord:
    id: str
    org_id: str
    workspace_id: str
    slug: str
    display_name: str
    visibility: str
    metadata: dict[str, object]  # the caller's own JSON document (any object)
    intent: str
    soul: Soul
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
    card_extra: dict[str, object] | None  # an imported card's `data`, verbatim (cards.py): free-form JSON
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    purge_at: datetime | None
    archived_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewPersona:
    id: str
    org_id: str
    workspace_id: str
    slug: str
    display_name: str
    visibility: str
    metadata: dict[str, object]
    intent: str
    soul: Soul
    parent_id: str | None
    root_id: str
    fork_ordinal: int
    fork_note: str
    audit_score: float | None
    last_run_id: str
    card_extra: dict[str, object] | None
    created_at: datetime
    updated_at: datetime
    state: str = "active"
    version: int = 1


@dataclass(frozen=True, slots=True)
class PersonaFilters:
    """Which personas a list shows ("": any); deleted ones only when asked (`show_deleted`, or that state)."""

    state: str = ""
    visibility: str = ""
    root_id: str = ""
    show_deleted: bool = False


@dataclass(frozen=True, slots=True)
class PersonaEdit:
    """What a caller may change of a persona (UpdatePersona): None is left as it is."""

    slug: str | None = None
    display_name: str | None = None
    visibility: str | None = None
    metadata: dict[str, object] | None = None


@dataclass(frozen=True, slots=True)
class PersonaChanges:
    """What a write of a persona sets besides `updated_at` (None: left as it is; a restore, which clears the
    deletion's columns, is `PersonaRepository.restore`)."""

    updated_at: datetime
    slug: str | None = None
    display_name: str | None = None
    visibility: str | None = None
    metadata: dict[str, object] | None = None
    soul: Soul | None = None
    version: int | None = None
    last_run_id: str | None = None
    audit_score: float | None = None
    state: str | None = None
    state_before_delete: str | None = None
    flagged_reason: str | None = None
    deleted_at: datetime | None = None
    purge_at: datetime | None = None
    archived_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class NewVersion:
    persona_id: str
    version: int
    kind: str
    soul: Soul
    voice: Voice
    run_id: str
    created_at: datetime
    fingerprint: list[float]
    fingerprint_model: str
    note: str = ""
    instruction: str = ""
    source_version: int | None = None  # for a rollback, the version it copies


@dataclass(frozen=True, slots=True)
class NewStep:
    """A generation run's step as it ended (written with the run's others, in one statement)."""

    run_id: str
    step: str
    ordinal: int
    status: str
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    attempts: int
    output: StepOutput | None  # None: a failed step's (its row holds {})
    error: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class PersonaSummary:
    """A persona as other modules list it (OpenAI's `/v1/models`)."""

    id: str
    org_id: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class VersionRow:
    """A version as its row holds it (soul and voice: JSON columns); the repository hands on `record()`."""

    persona_id: str
    version: int
    kind: str
    note: str
    instruction: str
    soul: dict[str, object]
    voice: dict[str, object]
    run_id: str
    created_at: datetime
    fingerprint: list[float] | None
    fingerprint_model: str | None
    source_version: int | None

    def record(self) -> VersionRecord:
        return VersionRecord(
            self.persona_id, self.version, self.kind, self.note, self.instruction, Soul.from_json(self.soul),
            Voice.from_json(self.voice), self.run_id, self.created_at, self.fingerprint, self.fingerprint_model,
            self.source_version,
        )


@dataclass(frozen=True, slots=True)
class VersionRecord:
    persona_id: str
    version: int
    kind: str
    note: str
    instruction: str
    soul: Soul
    voice: Voice
    run_id: str
    created_at: datetime
    fingerprint: list[float] | None  # None: made before versions kept theirs (migration 0021)
    fingerprint_model: str | None
    source_version: int | None  # for a rollback, the version it copies

    def voice_record(self, current: VoiceRecord) -> VoiceRecord:
        """This version's voice; the fingerprint is the current one's where the version kept none."""
        voice = self.voice
        return VoiceRecord(
            persona_id=self.persona_id, version=self.version, system_prompt=voice.system_prompt,
            greeting=voice.greeting, sample_dialogues=voice.sample_dialogues,
            style_notes=voice.style_notes, fingerprint=self.fingerprint or current.fingerprint,
            fingerprint_model=self.fingerprint_model or current.fingerprint_model, updated_at=self.created_at,
        )


@dataclass(frozen=True, slots=True)
class VoiceRow:
    """A voice profile as its row holds it (the sample dialogues: a JSON column); the repository hands on
    `record()`."""

    persona_id: str
    version: int
    system_prompt: str
    greeting: str
    sample_dialogues: list[dict[str, object]]
    style_notes: str
    fingerprint: list[float]
    fingerprint_model: str
    updated_at: datetime

    def record(self) -> VoiceRecord:
        return VoiceRecord(self.persona_id, self.version, self.system_prompt, self.greeting,
                           Dialogue.from_json_list(self.sample_dialogues), self.style_notes, self.fingerprint,
                           self.fingerprint_model, self.updated_at)


@dataclass(frozen=True, slots=True)
class VoiceRecord:
    persona_id: str
    version: int
    system_prompt: str
    greeting: str
    sample_dialogues: tuple[Dialogue, ...]
    style_notes: str
    fingerprint: list[float]
    fingerprint_model: str
    updated_at: datetime

    def as_output(self) -> Voice:
        """The voice as the pipeline's `write_voice` step output."""
        return Voice(self.system_prompt, self.greeting, self.sample_dialogues, self.style_notes)


@dataclass(frozen=True, slots=True)
class SortOrder:
    """The persona list's order (`orderBy`): a column and a direction."""

    column: str  # created_at | updated_at | display_name
    descending: bool

    DEFAULT = "created_at desc"

    @classmethod
    def parse(cls, order_by: str) -> SortOrder:
        """An `orderBy` the request's rules admitted (`<field>[ asc|desc]`); empty: the default."""
        column, _, direction = (order_by or cls.DEFAULT).partition(" ")
        return cls(column, direction == "desc")

    @property
    def text(self) -> str:
        return f"{self.column} {'desc' if self.descending else 'asc'}"


@dataclass(frozen=True, slots=True)
class SortKey:
    """A listed persona's value of the list's sort key (what its cursor holds)."""

    id: str
    sort_key: datetime | str  # created_at, updated_at: datetime; display_name: its lower() text


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A field that differs between two versions (its JSON path, its values)."""

    field: str
    before: object  # JSON values (a soul's or a voice's field)
    after: object


@dataclass(frozen=True, slots=True)
class StepEstimate:
    step: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class GenerationPreview:
    """What a generation would spend: estimated tokens and cost, and the quota as it stands."""

    model: str
    steps: list[StepEstimate]
    cost_usd_micros: int
    quota_limit: int
    quota_used: int
    resets_at: datetime
    unpriced: bool = False  # the model has no price: the cost is unknown, not 0

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.steps)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.steps)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A step's row as read back (its output: the JSON `personas.step_records` decodes)."""

    step: str
    output: object  # JSON (its column's); an object where the step finished


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


@dataclass(frozen=True, slots=True)
class PipelineProgress:
    """A generation run's progress, as its stream reports it: `run.started`, then `step.started` and
    `step.completed` (with its `duration_ms`) per step."""

    event: str
    run_id: str
    step: str = ""
    duration_ms: int = 0
