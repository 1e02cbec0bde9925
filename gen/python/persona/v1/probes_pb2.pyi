from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetMetricsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLivenessRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetReadinessRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProbeCheck(_message.Message):
    __slots__ = ("name", "ok", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    ok: bool
    detail: str
    def __init__(self, name: _Optional[str] = ..., ok: _Optional[bool] = ..., detail: _Optional[str] = ...) -> None: ...

class ProbeResult(_message.Message):
    __slots__ = ("status", "checks")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    status: str
    checks: _containers.RepeatedCompositeFieldContainer[ProbeCheck]
    def __init__(self, status: _Optional[str] = ..., checks: _Optional[_Iterable[_Union[ProbeCheck, _Mapping]]] = ...) -> None: ...
