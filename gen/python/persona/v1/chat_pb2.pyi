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

class ChatSessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHAT_SESSION_STATUS_UNSPECIFIED: _ClassVar[ChatSessionStatus]
    CHAT_SESSION_STATUS_ACTIVE: _ClassVar[ChatSessionStatus]
    CHAT_SESSION_STATUS_ENDED: _ClassVar[ChatSessionStatus]
    CHAT_SESSION_STATUS_ARCHIVED: _ClassVar[ChatSessionStatus]
CHAT_SESSION_STATUS_UNSPECIFIED: ChatSessionStatus
CHAT_SESSION_STATUS_ACTIVE: ChatSessionStatus
CHAT_SESSION_STATUS_ENDED: ChatSessionStatus
CHAT_SESSION_STATUS_ARCHIVED: ChatSessionStatus

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

class CreateChatSessionRequest(_message.Message):
    __slots__ = ("persona_id", "user_id", "title")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    user_id: str
    title: str
    def __init__(self, persona_id: _Optional[str] = ..., user_id: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class ListChatSessionsRequest(_message.Message):
    __slots__ = ("limit", "cursor", "persona_id", "status", "user_id")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    limit: int
    cursor: str
    persona_id: str
    status: str
    user_id: str
    def __init__(self, limit: _Optional[int] = ..., cursor: _Optional[str] = ..., persona_id: _Optional[str] = ..., status: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class ListChatSessionsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ChatSession]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[ChatSession, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class EndChatSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ArchiveChatSessionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class SendChatMessageRequest(_message.Message):
    __slots__ = ("id", "content")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: str
    def __init__(self, id: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ChatUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cost_usd_micros")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_MICROS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cost_usd_micros: float
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd_micros: _Optional[float] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("id", "session_id", "role", "content", "ordinal", "model", "drift_score", "recovered", "usage", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DRIFT_SCORE_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    session_id: str
    role: str
    content: str
    ordinal: int
    model: str
    drift_score: float
    recovered: bool
    usage: ChatUsage
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., role: _Optional[str] = ..., content: _Optional[str] = ..., ordinal: _Optional[int] = ..., model: _Optional[str] = ..., drift_score: _Optional[float] = ..., recovered: _Optional[bool] = ..., usage: _Optional[_Union[ChatUsage, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SendChatMessageResponse(_message.Message):
    __slots__ = ("user_message", "reply", "session")
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    user_message: ChatMessage
    reply: ChatMessage
    session: ChatSession
    def __init__(self, user_message: _Optional[_Union[ChatMessage, _Mapping]] = ..., reply: _Optional[_Union[ChatMessage, _Mapping]] = ..., session: _Optional[_Union[ChatSession, _Mapping]] = ...) -> None: ...

class ChatMessageEvent(_message.Message):
    __slots__ = ("event", "delta", "user_message", "reply", "session", "error")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    event: str
    delta: str
    user_message: ChatMessage
    reply: ChatMessage
    session: ChatSession
    error: _errors_pb2.Error
    def __init__(self, event: _Optional[str] = ..., delta: _Optional[str] = ..., user_message: _Optional[_Union[ChatMessage, _Mapping]] = ..., reply: _Optional[_Union[ChatMessage, _Mapping]] = ..., session: _Optional[_Union[ChatSession, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class ListChatMessagesRequest(_message.Message):
    __slots__ = ("id", "limit", "cursor")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    limit: int
    cursor: str
    def __init__(self, id: _Optional[str] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListChatMessagesResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...
