import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModerationReviewStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODERATION_REVIEW_STATUS_UNSPECIFIED: _ClassVar[ModerationReviewStatus]
    MODERATION_REVIEW_STATUS_PENDING: _ClassVar[ModerationReviewStatus]
    MODERATION_REVIEW_STATUS_CLAIMED: _ClassVar[ModerationReviewStatus]
    MODERATION_REVIEW_STATUS_RESOLVED: _ClassVar[ModerationReviewStatus]

class ModerationDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODERATION_DECISION_UNSPECIFIED: _ClassVar[ModerationDecision]
    MODERATION_DECISION_APPROVE: _ClassVar[ModerationDecision]
    MODERATION_DECISION_REJECT: _ClassVar[ModerationDecision]
MODERATION_REVIEW_STATUS_UNSPECIFIED: ModerationReviewStatus
MODERATION_REVIEW_STATUS_PENDING: ModerationReviewStatus
MODERATION_REVIEW_STATUS_CLAIMED: ModerationReviewStatus
MODERATION_REVIEW_STATUS_RESOLVED: ModerationReviewStatus
MODERATION_DECISION_UNSPECIFIED: ModerationDecision
MODERATION_DECISION_APPROVE: ModerationDecision
MODERATION_DECISION_REJECT: ModerationDecision

class ModerationReview(_message.Message):
    __slots__ = ("id", "org_id", "workspace_id", "stage", "subject_type", "subject_id", "categories", "scores", "excerpt", "status", "claimed_by", "claim_expires_at", "decision", "note", "resolved_by", "resolved_at", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_BY_FIELD_NUMBER: _ClassVar[int]
    CLAIM_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    org_id: str
    workspace_id: str
    stage: str
    subject_type: str
    subject_id: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    scores: _struct_pb2.Struct
    excerpt: str
    status: str
    claimed_by: str
    claim_expires_at: _struct_pb2.Value
    decision: str
    note: str
    resolved_by: str
    resolved_at: _struct_pb2.Value
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., org_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., stage: _Optional[str] = ..., subject_type: _Optional[str] = ..., subject_id: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ..., scores: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., excerpt: _Optional[str] = ..., status: _Optional[str] = ..., claimed_by: _Optional[str] = ..., claim_expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., decision: _Optional[str] = ..., note: _Optional[str] = ..., resolved_by: _Optional[str] = ..., resolved_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListModerationQueueRequest(_message.Message):
    __slots__ = ("stage", "category", "org_id", "cursor", "limit")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    stage: str
    category: str
    org_id: str
    cursor: str
    limit: int
    def __init__(self, stage: _Optional[str] = ..., category: _Optional[str] = ..., org_id: _Optional[str] = ..., cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListModerationQueueResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ModerationReview]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[ModerationReview, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class ClaimModerationReviewRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ResolveModerationReviewRequest(_message.Message):
    __slots__ = ("id", "decision", "note")
    ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    id: str
    decision: str
    note: str
    def __init__(self, id: _Optional[str] = ..., decision: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...
