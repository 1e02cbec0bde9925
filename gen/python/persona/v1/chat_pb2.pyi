import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChatSession(_message.Message):
    __slots__ = ("session_id", "org_id", "workspace_id", "persona_id", "user_id", "title", "status", "message_count", "input_tokens", "output_tokens", "cost_usd_micros", "started_at", "last_active_at", "ended_at")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_MICROS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    org_id: str
    workspace_id: str
    persona_id: str
    user_id: str
    title: str
    status: str
    message_count: int
    input_tokens: int
    output_tokens: int
    cost_usd_micros: float
    started_at: _timestamp_pb2.Timestamp
    last_active_at: _timestamp_pb2.Timestamp
    ended_at: _struct_pb2.Value
    def __init__(self, session_id: _Optional[str] = ..., org_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., persona_id: _Optional[str] = ..., user_id: _Optional[str] = ..., title: _Optional[str] = ..., status: _Optional[str] = ..., message_count: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd_micros: _Optional[float] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_active_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class GetChatSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
