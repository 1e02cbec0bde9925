from google.protobuf import struct_pb2 as _struct_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    ERROR_CODE_UNAUTHORIZED: _ClassVar[ErrorCode]
    ERROR_CODE_FORBIDDEN: _ClassVar[ErrorCode]
    ERROR_CODE_NOT_FOUND: _ClassVar[ErrorCode]
    ERROR_CODE_VALIDATION_FAILED: _ClassVar[ErrorCode]
    ERROR_CODE_IDEMPOTENCY_CONFLICT: _ClassVar[ErrorCode]
    ERROR_CODE_STATE_CONFLICT: _ClassVar[ErrorCode]
    ERROR_CODE_DRIFT_BLOCKED: _ClassVar[ErrorCode]
    ERROR_CODE_AUDIT_BLOCKED: _ClassVar[ErrorCode]
    ERROR_CODE_MODERATION_BLOCKED: _ClassVar[ErrorCode]
    ERROR_CODE_RATE_LIMITED: _ClassVar[ErrorCode]
    ERROR_CODE_QUOTA_EXCEEDED: _ClassVar[ErrorCode]
    ERROR_CODE_PROVIDER_ERROR: _ClassVar[ErrorCode]
    ERROR_CODE_PROVIDER_TIMEOUT: _ClassVar[ErrorCode]
    ERROR_CODE_INTERNAL_ERROR: _ClassVar[ErrorCode]
    ERROR_CODE_BAD_REQUEST: _ClassVar[ErrorCode]
    ERROR_CODE_SERVICE_UNAVAILABLE: _ClassVar[ErrorCode]
    ERROR_CODE_PAYLOAD_TOO_LARGE: _ClassVar[ErrorCode]
    ERROR_CODE_REQUEST_TIMEOUT: _ClassVar[ErrorCode]
    ERROR_CODE_HEADERS_TOO_LARGE: _ClassVar[ErrorCode]
    ERROR_CODE_UNSUPPORTED_MEDIA_TYPE: _ClassVar[ErrorCode]
    ERROR_CODE_ASSET_EXPIRED: _ClassVar[ErrorCode]
    ERROR_CODE_PRECONDITION_FAILED: _ClassVar[ErrorCode]
    ERROR_CODE_NOT_IMPLEMENTED: _ClassVar[ErrorCode]
    ERROR_CODE_METHOD_NOT_ALLOWED: _ClassVar[ErrorCode]
    ERROR_CODE_UPGRADE_REQUIRED: _ClassVar[ErrorCode]
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_UNAUTHORIZED: ErrorCode
ERROR_CODE_FORBIDDEN: ErrorCode
ERROR_CODE_NOT_FOUND: ErrorCode
ERROR_CODE_VALIDATION_FAILED: ErrorCode
ERROR_CODE_IDEMPOTENCY_CONFLICT: ErrorCode
ERROR_CODE_STATE_CONFLICT: ErrorCode
ERROR_CODE_DRIFT_BLOCKED: ErrorCode
ERROR_CODE_AUDIT_BLOCKED: ErrorCode
ERROR_CODE_MODERATION_BLOCKED: ErrorCode
ERROR_CODE_RATE_LIMITED: ErrorCode
ERROR_CODE_QUOTA_EXCEEDED: ErrorCode
ERROR_CODE_PROVIDER_ERROR: ErrorCode
ERROR_CODE_PROVIDER_TIMEOUT: ErrorCode
ERROR_CODE_INTERNAL_ERROR: ErrorCode
ERROR_CODE_BAD_REQUEST: ErrorCode
ERROR_CODE_SERVICE_UNAVAILABLE: ErrorCode
ERROR_CODE_PAYLOAD_TOO_LARGE: ErrorCode
ERROR_CODE_REQUEST_TIMEOUT: ErrorCode
ERROR_CODE_HEADERS_TOO_LARGE: ErrorCode
ERROR_CODE_UNSUPPORTED_MEDIA_TYPE: ErrorCode
ERROR_CODE_ASSET_EXPIRED: ErrorCode
ERROR_CODE_PRECONDITION_FAILED: ErrorCode
ERROR_CODE_NOT_IMPLEMENTED: ErrorCode
ERROR_CODE_METHOD_NOT_ALLOWED: ErrorCode
ERROR_CODE_UPGRADE_REQUIRED: ErrorCode

class ErrorEnvelope(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: Error
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "details")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    details: _struct_pb2.Struct
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...
