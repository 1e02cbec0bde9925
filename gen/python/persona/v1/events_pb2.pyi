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

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_CREATED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_UPDATED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_DELETED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_ARCHIVED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_REGENERATED: _ClassVar[EventType]
    EVENT_TYPE_PERSONA_AUDIT_FAILED: _ClassVar[EventType]
    EVENT_TYPE_GENERATION_RUN_STARTED: _ClassVar[EventType]
    EVENT_TYPE_GENERATION_RUN_COMPLETED: _ClassVar[EventType]
    EVENT_TYPE_GENERATION_RUN_FAILED: _ClassVar[EventType]
    EVENT_TYPE_SUBSCRIPTION_UPGRADED: _ClassVar[EventType]
    EVENT_TYPE_SUBSCRIPTION_DOWNGRADED: _ClassVar[EventType]
    EVENT_TYPE_SUBSCRIPTION_CANCELLED: _ClassVar[EventType]
    EVENT_TYPE_MARKETPLACE_PERSONA_PUBLISHED: _ClassVar[EventType]
    EVENT_TYPE_MARKETPLACE_PERSONA_PURCHASED: _ClassVar[EventType]
    EVENT_TYPE_MODERATION_FLAGGED: _ClassVar[EventType]
    EVENT_TYPE_WEBHOOK_ENDPOINT_TEST_PING: _ClassVar[EventType]
EVENT_TYPE_UNSPECIFIED: EventType
EVENT_TYPE_PERSONA_CREATED: EventType
EVENT_TYPE_PERSONA_UPDATED: EventType
EVENT_TYPE_PERSONA_DELETED: EventType
EVENT_TYPE_PERSONA_ARCHIVED: EventType
EVENT_TYPE_PERSONA_REGENERATED: EventType
EVENT_TYPE_PERSONA_AUDIT_FAILED: EventType
EVENT_TYPE_GENERATION_RUN_STARTED: EventType
EVENT_TYPE_GENERATION_RUN_COMPLETED: EventType
EVENT_TYPE_GENERATION_RUN_FAILED: EventType
EVENT_TYPE_SUBSCRIPTION_UPGRADED: EventType
EVENT_TYPE_SUBSCRIPTION_DOWNGRADED: EventType
EVENT_TYPE_SUBSCRIPTION_CANCELLED: EventType
EVENT_TYPE_MARKETPLACE_PERSONA_PUBLISHED: EventType
EVENT_TYPE_MARKETPLACE_PERSONA_PURCHASED: EventType
EVENT_TYPE_MODERATION_FLAGGED: EventType
EVENT_TYPE_WEBHOOK_ENDPOINT_TEST_PING: EventType

class Event(_message.Message):
    __slots__ = ("id", "type", "occurred_at", "org_id", "workspace_id", "data")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    occurred_at: _timestamp_pb2.Timestamp
    org_id: str
    workspace_id: str
    data: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., org_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("limit", "cursor", "type", "persona_id")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    limit: int
    cursor: str
    type: str
    persona_id: str
    def __init__(self, limit: _Optional[int] = ..., cursor: _Optional[str] = ..., type: _Optional[str] = ..., persona_id: _Optional[str] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Event]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetEventRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
