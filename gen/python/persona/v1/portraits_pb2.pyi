import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PortraitStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PORTRAIT_STATUS_UNSPECIFIED: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_PENDING: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_GENERATING: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_GENERATED: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_APPROVED: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_REJECTED: _ClassVar[PortraitStatus]
    PORTRAIT_STATUS_FAILED: _ClassVar[PortraitStatus]
PORTRAIT_STATUS_UNSPECIFIED: PortraitStatus
PORTRAIT_STATUS_PENDING: PortraitStatus
PORTRAIT_STATUS_GENERATING: PortraitStatus
PORTRAIT_STATUS_GENERATED: PortraitStatus
PORTRAIT_STATUS_APPROVED: PortraitStatus
PORTRAIT_STATUS_REJECTED: PortraitStatus
PORTRAIT_STATUS_FAILED: PortraitStatus

class Portrait(_message.Message):
    __slots__ = ("id", "persona_id", "conversation_id", "parent_portrait_id", "instruction", "prompt", "style", "status", "canonical", "storage_key", "signed_url", "signed_url_expires_at", "size", "width", "height", "failure_code", "created_at", "updated_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_PORTRAIT_ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    STYLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNED_URL_FIELD_NUMBER: _ClassVar[int]
    SIGNED_URL_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    persona_id: str
    conversation_id: str
    parent_portrait_id: str
    instruction: str
    prompt: str
    style: str
    status: str
    canonical: bool
    storage_key: str
    signed_url: str
    signed_url_expires_at: _timestamp_pb2.Timestamp
    size: int
    width: int
    height: int
    failure_code: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., persona_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., parent_portrait_id: _Optional[str] = ..., instruction: _Optional[str] = ..., prompt: _Optional[str] = ..., style: _Optional[str] = ..., status: _Optional[str] = ..., canonical: _Optional[bool] = ..., storage_key: _Optional[str] = ..., signed_url: _Optional[str] = ..., signed_url_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., size: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., failure_code: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PortraitEditResult(_message.Message):
    __slots__ = ("portrait_id", "conversation_id", "status", "storage_key", "signed_url")
    PORTRAIT_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STORAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNED_URL_FIELD_NUMBER: _ClassVar[int]
    portrait_id: str
    conversation_id: str
    status: str
    storage_key: str
    signed_url: str
    def __init__(self, portrait_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., status: _Optional[str] = ..., storage_key: _Optional[str] = ..., signed_url: _Optional[str] = ...) -> None: ...

class CreatePortraitRequest(_message.Message):
    __slots__ = ("persona_id", "prompt", "style")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    STYLE_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    prompt: str
    style: str
    def __init__(self, persona_id: _Optional[str] = ..., prompt: _Optional[str] = ..., style: _Optional[str] = ...) -> None: ...

class ListPortraitsRequest(_message.Message):
    __slots__ = ("persona_id", "conversation_id", "cursor", "limit")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    conversation_id: str
    cursor: str
    limit: int
    def __init__(self, persona_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListPortraitsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Portrait]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[Portrait, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetPortraitRequest(_message.Message):
    __slots__ = ("persona_id", "id")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    id: str
    def __init__(self, persona_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class ApprovePortraitRequest(_message.Message):
    __slots__ = ("persona_id", "id")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    id: str
    def __init__(self, persona_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class RejectPortraitRequest(_message.Message):
    __slots__ = ("persona_id", "id")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    id: str
    def __init__(self, persona_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class EditPortraitRequest(_message.Message):
    __slots__ = ("persona_id", "id", "instruction")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    id: str
    instruction: str
    def __init__(self, persona_id: _Optional[str] = ..., id: _Optional[str] = ..., instruction: _Optional[str] = ...) -> None: ...
