from google.api import annotations_pb2 as _annotations_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class BuildOneDsarExportRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BuildOneDsarExportResponse(_message.Message):
    __slots__ = ("handled", "job_id")
    HANDLED_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    handled: bool
    job_id: str
    def __init__(self, handled: _Optional[bool] = ..., job_id: _Optional[str] = ...) -> None: ...
