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

class PrivacyExportStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIVACY_EXPORT_STATUS_UNSPECIFIED: _ClassVar[PrivacyExportStatus]
    PRIVACY_EXPORT_STATUS_PENDING: _ClassVar[PrivacyExportStatus]
    PRIVACY_EXPORT_STATUS_RUNNING: _ClassVar[PrivacyExportStatus]
    PRIVACY_EXPORT_STATUS_COMPLETED: _ClassVar[PrivacyExportStatus]
    PRIVACY_EXPORT_STATUS_FAILED: _ClassVar[PrivacyExportStatus]
    PRIVACY_EXPORT_STATUS_EXPIRED: _ClassVar[PrivacyExportStatus]
PRIVACY_EXPORT_STATUS_UNSPECIFIED: PrivacyExportStatus
PRIVACY_EXPORT_STATUS_PENDING: PrivacyExportStatus
PRIVACY_EXPORT_STATUS_RUNNING: PrivacyExportStatus
PRIVACY_EXPORT_STATUS_COMPLETED: PrivacyExportStatus
PRIVACY_EXPORT_STATUS_FAILED: PrivacyExportStatus
PRIVACY_EXPORT_STATUS_EXPIRED: PrivacyExportStatus

class EraseMyDataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PrivacyErasure(_message.Message):
    __slots__ = ("erased_at", "counts")
    ERASED_AT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    erased_at: _timestamp_pb2.Timestamp
    counts: _struct_pb2.Struct
    def __init__(self, erased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., counts: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PrivacyExport(_message.Message):
    __slots__ = ("id", "status", "download_url", "expires_at", "sha256", "created_at", "completed_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DOWNLOAD_URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    download_url: str
    expires_at: _struct_pb2.Value
    sha256: str
    created_at: _timestamp_pb2.Timestamp
    completed_at: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., download_url: _Optional[str] = ..., expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., sha256: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CreatePrivacyExportRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPrivacyExportsRequest(_message.Message):
    __slots__ = ("cursor", "limit")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    limit: int
    def __init__(self, cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListPrivacyExportsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PrivacyExport]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[PrivacyExport, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...
