import datetime

from google.api import annotations_pb2 as _annotations_pb2
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

class SecretRotationOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SECRET_ROTATION_OUTCOME_UNSPECIFIED: _ClassVar[SecretRotationOutcome]
    SECRET_ROTATION_OUTCOME_ROTATED: _ClassVar[SecretRotationOutcome]
    SECRET_ROTATION_OUTCOME_CURRENT: _ClassVar[SecretRotationOutcome]
SECRET_ROTATION_OUTCOME_UNSPECIFIED: SecretRotationOutcome
SECRET_ROTATION_OUTCOME_ROTATED: SecretRotationOutcome
SECRET_ROTATION_OUTCOME_CURRENT: SecretRotationOutcome

class BuildOneDsarExportRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BuildOneDsarExportResponse(_message.Message):
    __slots__ = ("handled", "job_id", "export_id")
    HANDLED_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXPORT_ID_FIELD_NUMBER: _ClassVar[int]
    handled: bool
    job_id: str
    export_id: str
    def __init__(self, handled: _Optional[bool] = ..., job_id: _Optional[str] = ..., export_id: _Optional[str] = ...) -> None: ...

class RotateWebhookSecretsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WebhookSecretRotationResult(_message.Message):
    __slots__ = ("endpoint_id", "org_id", "outcome", "secret_created_at", "previous_secret_expires_at")
    ENDPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SECRET_CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    endpoint_id: str
    org_id: str
    outcome: str
    secret_created_at: _timestamp_pb2.Timestamp
    previous_secret_expires_at: _struct_pb2.Value
    def __init__(self, endpoint_id: _Optional[str] = ..., org_id: _Optional[str] = ..., outcome: _Optional[str] = ..., secret_created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_secret_expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class RotateWebhookSecretsResponse(_message.Message):
    __slots__ = ("results", "rotated_count", "max_age_seconds", "secret_rotation_grace_seconds")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ROTATED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SECRET_ROTATION_GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WebhookSecretRotationResult]
    rotated_count: int
    max_age_seconds: int
    secret_rotation_grace_seconds: int
    def __init__(self, results: _Optional[_Iterable[_Union[WebhookSecretRotationResult, _Mapping]]] = ..., rotated_count: _Optional[int] = ..., max_age_seconds: _Optional[int] = ..., secret_rotation_grace_seconds: _Optional[int] = ...) -> None: ...
