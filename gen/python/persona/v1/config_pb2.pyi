from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigItem(_message.Message):
    __slots__ = ("key", "value", "source", "settable_at", "type", "allowed_values", "updated_at")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SETTABLE_AT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_VALUES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Value
    source: str
    settable_at: _containers.RepeatedScalarFieldContainer[str]
    type: str
    allowed_values: _containers.RepeatedScalarFieldContainer[str]
    updated_at: _struct_pb2.Value
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., source: _Optional[str] = ..., settable_at: _Optional[_Iterable[str]] = ..., type: _Optional[str] = ..., allowed_values: _Optional[_Iterable[str]] = ..., updated_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ListConfigItemsRequest(_message.Message):
    __slots__ = ("prefix", "cursor", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    cursor: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListConfigItemsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ConfigItem]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[ConfigItem, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetConfigItemRequest(_message.Message):
    __slots__ = ("key", "persona_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    persona_id: str
    def __init__(self, key: _Optional[str] = ..., persona_id: _Optional[str] = ...) -> None: ...

class UpdateConfigItemRequest(_message.Message):
    __slots__ = ("key", "value", "level", "persona_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: _struct_pb2.Value
    level: str
    persona_id: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., level: _Optional[str] = ..., persona_id: _Optional[str] = ...) -> None: ...

class DeleteConfigItemRequest(_message.Message):
    __slots__ = ("key", "level", "persona_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    level: str
    persona_id: str
    def __init__(self, key: _Optional[str] = ..., level: _Optional[str] = ..., persona_id: _Optional[str] = ...) -> None: ...
