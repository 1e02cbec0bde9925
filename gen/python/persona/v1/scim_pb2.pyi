import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetServiceProviderConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListResourceTypesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetResourceTypeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ListSchemasRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSchemaRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CreateScimUserRequest(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    def __init__(self, body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class GetScimUserRequest(_message.Message):
    __slots__ = ("id", "attributes", "excluded_attributes")
    ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    id: str
    attributes: str
    excluded_attributes: str
    def __init__(self, id: _Optional[str] = ..., attributes: _Optional[str] = ..., excluded_attributes: _Optional[str] = ...) -> None: ...

class ListScimUsersRequest(_message.Message):
    __slots__ = ("filter", "start_index", "count", "attributes", "excluded_attributes", "sort_by", "sort_order")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    SORT_ORDER_FIELD_NUMBER: _ClassVar[int]
    filter: str
    start_index: int
    count: int
    attributes: str
    excluded_attributes: str
    sort_by: str
    sort_order: str
    def __init__(self, filter: _Optional[str] = ..., start_index: _Optional[int] = ..., count: _Optional[int] = ..., attributes: _Optional[str] = ..., excluded_attributes: _Optional[str] = ..., sort_by: _Optional[str] = ..., sort_order: _Optional[str] = ...) -> None: ...

class SearchScimUsersRequest(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    def __init__(self, body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class ReplaceScimUserRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _httpbody_pb2.HttpBody
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class PatchScimUserRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _httpbody_pb2.HttpBody
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class DeleteScimUserRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CreateScimGroupRequest(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    def __init__(self, body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class GetScimGroupRequest(_message.Message):
    __slots__ = ("id", "attributes", "excluded_attributes")
    ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    id: str
    attributes: str
    excluded_attributes: str
    def __init__(self, id: _Optional[str] = ..., attributes: _Optional[str] = ..., excluded_attributes: _Optional[str] = ...) -> None: ...

class ListScimGroupsRequest(_message.Message):
    __slots__ = ("filter", "start_index", "count", "attributes", "excluded_attributes", "sort_by", "sort_order")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    START_INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    SORT_ORDER_FIELD_NUMBER: _ClassVar[int]
    filter: str
    start_index: int
    count: int
    attributes: str
    excluded_attributes: str
    sort_by: str
    sort_order: str
    def __init__(self, filter: _Optional[str] = ..., start_index: _Optional[int] = ..., count: _Optional[int] = ..., attributes: _Optional[str] = ..., excluded_attributes: _Optional[str] = ..., sort_by: _Optional[str] = ..., sort_order: _Optional[str] = ...) -> None: ...

class SearchScimGroupsRequest(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    def __init__(self, body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class ReplaceScimGroupRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _httpbody_pb2.HttpBody
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class PatchScimGroupRequest(_message.Message):
    __slots__ = ("id", "body")
    ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    id: str
    body: _httpbody_pb2.HttpBody
    def __init__(self, id: _Optional[str] = ..., body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class DeleteScimGroupRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RejectDiscoveryWriteRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class SearchScimResourcesRequest(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: _httpbody_pb2.HttpBody
    def __init__(self, body: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class ScimToken(_message.Message):
    __slots__ = ("id", "name", "prefix", "created_at", "revoked_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    prefix: str
    created_at: _timestamp_pb2.Timestamp
    revoked_at: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., prefix: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CreateScimTokenRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CreateScimTokenResponse(_message.Message):
    __slots__ = ("token", "secret")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    token: ScimToken
    secret: str
    def __init__(self, token: _Optional[_Union[ScimToken, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListScimTokensRequest(_message.Message):
    __slots__ = ("cursor", "limit")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    limit: int
    def __init__(self, cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListScimTokensResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScimToken]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[ScimToken, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class RevokeScimTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
