import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from persona.v1 import errors_pb2 as _errors_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PersonaState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PERSONA_STATE_UNSPECIFIED: _ClassVar[PersonaState]
    PERSONA_STATE_ACTIVE: _ClassVar[PersonaState]
    PERSONA_STATE_FLAGGED: _ClassVar[PersonaState]
    PERSONA_STATE_ARCHIVED: _ClassVar[PersonaState]
    PERSONA_STATE_DELETED: _ClassVar[PersonaState]

class LineageVersionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINEAGE_VERSION_KIND_UNSPECIFIED: _ClassVar[LineageVersionKind]
    LINEAGE_VERSION_KIND_CREATE: _ClassVar[LineageVersionKind]
    LINEAGE_VERSION_KIND_REFINE: _ClassVar[LineageVersionKind]
    LINEAGE_VERSION_KIND_REGENERATE: _ClassVar[LineageVersionKind]
    LINEAGE_VERSION_KIND_FORK: _ClassVar[LineageVersionKind]
    LINEAGE_VERSION_KIND_IMPORT: _ClassVar[LineageVersionKind]
PERSONA_STATE_UNSPECIFIED: PersonaState
PERSONA_STATE_ACTIVE: PersonaState
PERSONA_STATE_FLAGGED: PersonaState
PERSONA_STATE_ARCHIVED: PersonaState
PERSONA_STATE_DELETED: PersonaState
LINEAGE_VERSION_KIND_UNSPECIFIED: LineageVersionKind
LINEAGE_VERSION_KIND_CREATE: LineageVersionKind
LINEAGE_VERSION_KIND_REFINE: LineageVersionKind
LINEAGE_VERSION_KIND_REGENERATE: LineageVersionKind
LINEAGE_VERSION_KIND_FORK: LineageVersionKind
LINEAGE_VERSION_KIND_IMPORT: LineageVersionKind

class Persona(_message.Message):
    __slots__ = ("id", "org_id", "workspace_id", "slug", "display_name", "visibility", "metadata", "intent", "soul", "state", "version", "parent_id", "root_id", "fork_ordinal", "audit_score", "flagged_reason", "last_run_id", "created_at", "updated_at", "deleted_at", "purge_at", "archived_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    INTENT_FIELD_NUMBER: _ClassVar[int]
    SOUL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    FORK_ORDINAL_FIELD_NUMBER: _ClassVar[int]
    AUDIT_SCORE_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    DELETED_AT_FIELD_NUMBER: _ClassVar[int]
    PURGE_AT_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    org_id: str
    workspace_id: str
    slug: str
    display_name: str
    visibility: str
    metadata: _struct_pb2.Struct
    intent: str
    soul: Soul
    state: str
    version: int
    parent_id: str
    root_id: str
    fork_ordinal: int
    audit_score: float
    flagged_reason: str
    last_run_id: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    deleted_at: _struct_pb2.Value
    purge_at: _struct_pb2.Value
    archived_at: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., org_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ..., visibility: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., intent: _Optional[str] = ..., soul: _Optional[_Union[Soul, _Mapping]] = ..., state: _Optional[str] = ..., version: _Optional[int] = ..., parent_id: _Optional[str] = ..., root_id: _Optional[str] = ..., fork_ordinal: _Optional[int] = ..., audit_score: _Optional[float] = ..., flagged_reason: _Optional[str] = ..., last_run_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deleted_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., purge_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., archived_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Soul(_message.Message):
    __slots__ = ("name", "desire", "fear", "backstory", "traits", "values", "speaking_style")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESIRE_FIELD_NUMBER: _ClassVar[int]
    FEAR_FIELD_NUMBER: _ClassVar[int]
    BACKSTORY_FIELD_NUMBER: _ClassVar[int]
    TRAITS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SPEAKING_STYLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    desire: str
    fear: str
    backstory: str
    traits: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.RepeatedScalarFieldContainer[str]
    speaking_style: str
    def __init__(self, name: _Optional[str] = ..., desire: _Optional[str] = ..., fear: _Optional[str] = ..., backstory: _Optional[str] = ..., traits: _Optional[_Iterable[str]] = ..., values: _Optional[_Iterable[str]] = ..., speaking_style: _Optional[str] = ...) -> None: ...

class VoiceProfile(_message.Message):
    __slots__ = ("persona_id", "version", "system_prompt", "greeting", "sample_dialogues", "style_notes", "fingerprint_model", "fingerprint_dimensions")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    GREETING_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_DIALOGUES_FIELD_NUMBER: _ClassVar[int]
    STYLE_NOTES_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_MODEL_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    version: int
    system_prompt: str
    greeting: str
    sample_dialogues: _containers.RepeatedCompositeFieldContainer[SampleDialogue]
    style_notes: str
    fingerprint_model: str
    fingerprint_dimensions: int
    def __init__(self, persona_id: _Optional[str] = ..., version: _Optional[int] = ..., system_prompt: _Optional[str] = ..., greeting: _Optional[str] = ..., sample_dialogues: _Optional[_Iterable[_Union[SampleDialogue, _Mapping]]] = ..., style_notes: _Optional[str] = ..., fingerprint_model: _Optional[str] = ..., fingerprint_dimensions: _Optional[int] = ...) -> None: ...

class SampleDialogue(_message.Message):
    __slots__ = ("user", "persona")
    USER_FIELD_NUMBER: _ClassVar[int]
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    user: str
    persona: str
    def __init__(self, user: _Optional[str] = ..., persona: _Optional[str] = ...) -> None: ...

class PipelineEvent(_message.Message):
    __slots__ = ("event", "run_id", "step", "duration_ms", "persona", "error")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    event: str
    run_id: str
    step: str
    duration_ms: int
    persona: Persona
    error: _errors_pb2.Error
    def __init__(self, event: _Optional[str] = ..., run_id: _Optional[str] = ..., step: _Optional[str] = ..., duration_ms: _Optional[int] = ..., persona: _Optional[_Union[Persona, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class CreatePersonaRequest(_message.Message):
    __slots__ = ("intent", "slug", "visibility", "metadata", "display_name", "soul")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    SOUL_FIELD_NUMBER: _ClassVar[int]
    intent: str
    slug: str
    visibility: str
    metadata: _struct_pb2.Struct
    display_name: str
    soul: Soul
    def __init__(self, intent: _Optional[str] = ..., slug: _Optional[str] = ..., visibility: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., display_name: _Optional[str] = ..., soul: _Optional[_Union[Soul, _Mapping]] = ...) -> None: ...

class GetPersonaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListPersonasRequest(_message.Message):
    __slots__ = ("limit", "cursor", "state", "visibility", "root_id", "show_deleted")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    SHOW_DELETED_FIELD_NUMBER: _ClassVar[int]
    limit: int
    cursor: str
    state: str
    visibility: str
    root_id: str
    show_deleted: bool
    def __init__(self, limit: _Optional[int] = ..., cursor: _Optional[str] = ..., state: _Optional[str] = ..., visibility: _Optional[str] = ..., root_id: _Optional[str] = ..., show_deleted: _Optional[bool] = ...) -> None: ...

class ListPersonasResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Persona]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[Persona, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class UpdatePersonaRequest(_message.Message):
    __slots__ = ("id", "slug", "display_name", "visibility", "metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    slug: str
    display_name: str
    visibility: str
    metadata: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., slug: _Optional[str] = ..., display_name: _Optional[str] = ..., visibility: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DeletePersonaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RestorePersonaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ArchivePersonaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RefinePersonaRequest(_message.Message):
    __slots__ = ("id", "instruction", "note")
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    instruction: str
    note: str
    def __init__(self, id: _Optional[str] = ..., instruction: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ForkPersonaRequest(_message.Message):
    __slots__ = ("id", "instruction", "slug", "note")
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    instruction: str
    slug: str
    note: str
    def __init__(self, id: _Optional[str] = ..., instruction: _Optional[str] = ..., slug: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class RegeneratePersonaRequest(_message.Message):
    __slots__ = ("id", "from_step")
    ID_FIELD_NUMBER: _ClassVar[int]
    FROM_STEP_FIELD_NUMBER: _ClassVar[int]
    id: str
    from_step: str
    def __init__(self, id: _Optional[str] = ..., from_step: _Optional[str] = ...) -> None: ...

class AuditPersonaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AuditPersonaResponse(_message.Message):
    __slots__ = ("persona", "score", "threshold", "provocation_passed", "passed", "notes")
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    PROVOCATION_PASSED_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    persona: Persona
    score: float
    threshold: float
    provocation_passed: bool
    passed: bool
    notes: str
    def __init__(self, persona: _Optional[_Union[Persona, _Mapping]] = ..., score: _Optional[float] = ..., threshold: _Optional[float] = ..., provocation_passed: _Optional[bool] = ..., passed: _Optional[bool] = ..., notes: _Optional[str] = ...) -> None: ...

class GetPersonaLineageRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class PersonaLineage(_message.Message):
    __slots__ = ("root", "size")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    root: LineageNode
    size: int
    def __init__(self, root: _Optional[_Union[LineageNode, _Mapping]] = ..., size: _Optional[int] = ...) -> None: ...

class LineageNode(_message.Message):
    __slots__ = ("persona_id", "slug", "state", "version", "fork_ordinal", "fork_note", "versions", "children")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FORK_ORDINAL_FIELD_NUMBER: _ClassVar[int]
    FORK_NOTE_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    slug: str
    state: str
    version: int
    fork_ordinal: int
    fork_note: str
    versions: _containers.RepeatedCompositeFieldContainer[LineageVersion]
    children: _containers.RepeatedCompositeFieldContainer[LineageNode]
    def __init__(self, persona_id: _Optional[str] = ..., slug: _Optional[str] = ..., state: _Optional[str] = ..., version: _Optional[int] = ..., fork_ordinal: _Optional[int] = ..., fork_note: _Optional[str] = ..., versions: _Optional[_Iterable[_Union[LineageVersion, _Mapping]]] = ..., children: _Optional[_Iterable[_Union[LineageNode, _Mapping]]] = ...) -> None: ...

class LineageVersion(_message.Message):
    __slots__ = ("version", "kind", "note", "instruction", "created_at")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    version: int
    kind: str
    note: str
    instruction: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., kind: _Optional[str] = ..., note: _Optional[str] = ..., instruction: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetVoiceProfileRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ExportPersonaCardRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ImportPersonaCardRequest(_message.Message):
    __slots__ = ("card",)
    CARD_FIELD_NUMBER: _ClassVar[int]
    card: CharacterCard
    def __init__(self, card: _Optional[_Union[CharacterCard, _Mapping]] = ...) -> None: ...

class CharacterCard(_message.Message):
    __slots__ = ("spec", "spec_version", "data")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_VERSION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    spec: str
    spec_version: str
    data: CharacterCardData
    def __init__(self, spec: _Optional[str] = ..., spec_version: _Optional[str] = ..., data: _Optional[_Union[CharacterCardData, _Mapping]] = ...) -> None: ...

class CharacterCardData(_message.Message):
    __slots__ = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes", "system_prompt", "post_history_instructions", "alternate_greetings", "tags", "creator", "character_version", "extensions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PERSONALITY_FIELD_NUMBER: _ClassVar[int]
    SCENARIO_FIELD_NUMBER: _ClassVar[int]
    FIRST_MES_FIELD_NUMBER: _ClassVar[int]
    MES_EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    CREATOR_NOTES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    POST_HISTORY_INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    ALTERNATE_GREETINGS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    CHARACTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    personality: str
    scenario: str
    first_mes: str
    mes_example: str
    creator_notes: str
    system_prompt: str
    post_history_instructions: str
    alternate_greetings: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    creator: str
    character_version: str
    extensions: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., personality: _Optional[str] = ..., scenario: _Optional[str] = ..., first_mes: _Optional[str] = ..., mes_example: _Optional[str] = ..., creator_notes: _Optional[str] = ..., system_prompt: _Optional[str] = ..., post_history_instructions: _Optional[str] = ..., alternate_greetings: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., creator: _Optional[str] = ..., character_version: _Optional[str] = ..., extensions: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
