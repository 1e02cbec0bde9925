from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.rpc import code_pb2 as _code_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResponseKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESPONSE_KIND_UNSPECIFIED: _ClassVar[ResponseKind]
    RESPONSE_KIND_JSON: _ClassVar[ResponseKind]
    RESPONSE_KIND_REDIRECT: _ClassVar[ResponseKind]
    RESPONSE_KIND_RAW_BODY: _ClassVar[ResponseKind]

class ErrorShape(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_SHAPE_UNSPECIFIED: _ClassVar[ErrorShape]
    ERROR_SHAPE_ENVELOPE: _ClassVar[ErrorShape]
    ERROR_SHAPE_PORTRAIT: _ClassVar[ErrorShape]
    ERROR_SHAPE_SCIM: _ClassVar[ErrorShape]
RESPONSE_KIND_UNSPECIFIED: ResponseKind
RESPONSE_KIND_JSON: ResponseKind
RESPONSE_KIND_REDIRECT: ResponseKind
RESPONSE_KIND_RAW_BODY: ResponseKind
ERROR_SHAPE_UNSPECIFIED: ErrorShape
ERROR_SHAPE_ENVELOPE: ErrorShape
ERROR_SHAPE_PORTRAIT: ErrorShape
ERROR_SHAPE_SCIM: ErrorShape
POLICY_FIELD_NUMBER: _ClassVar[int]
policy: _descriptor.FieldDescriptor
RULES_FIELD_NUMBER: _ClassVar[int]
rules: _descriptor.FieldDescriptor
ERROR_FIELD_NUMBER: _ClassVar[int]
error: _descriptor.FieldDescriptor
WIRE_NAME_FIELD_NUMBER: _ClassVar[int]
wire_name: _descriptor.FieldDescriptor

class MethodPolicy(_message.Message):
    __slots__ = ("scope", "platform_admin", "roles", "write", "endpoint_cap", "generation", "audit_action", "resource_type", "audited", "response", "error_shape", "anonymous", "success_status")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_ADMIN_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    WRITE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_CAP_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    AUDIT_ACTION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    AUDITED_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_SHAPE_FIELD_NUMBER: _ClassVar[int]
    ANONYMOUS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_STATUS_FIELD_NUMBER: _ClassVar[int]
    scope: str
    platform_admin: bool
    roles: _containers.RepeatedScalarFieldContainer[str]
    write: bool
    endpoint_cap: str
    generation: bool
    audit_action: str
    resource_type: str
    audited: bool
    response: ResponseKind
    error_shape: ErrorShape
    anonymous: bool
    success_status: int
    def __init__(self, scope: _Optional[str] = ..., platform_admin: _Optional[bool] = ..., roles: _Optional[_Iterable[str]] = ..., write: _Optional[bool] = ..., endpoint_cap: _Optional[str] = ..., generation: _Optional[bool] = ..., audit_action: _Optional[str] = ..., resource_type: _Optional[str] = ..., audited: _Optional[bool] = ..., response: _Optional[_Union[ResponseKind, str]] = ..., error_shape: _Optional[_Union[ErrorShape, str]] = ..., anonymous: _Optional[bool] = ..., success_status: _Optional[int] = ...) -> None: ...

class FieldRules(_message.Message):
    __slots__ = ("required", "min_len", "max_len", "one_of", "format", "unique", "min_value", "max_value", "one_of_enum")
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    MIN_LEN_FIELD_NUMBER: _ClassVar[int]
    MAX_LEN_FIELD_NUMBER: _ClassVar[int]
    ONE_OF_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_FIELD_NUMBER: _ClassVar[int]
    MIN_VALUE_FIELD_NUMBER: _ClassVar[int]
    MAX_VALUE_FIELD_NUMBER: _ClassVar[int]
    ONE_OF_ENUM_FIELD_NUMBER: _ClassVar[int]
    required: bool
    min_len: int
    max_len: int
    one_of: _containers.RepeatedScalarFieldContainer[str]
    format: str
    unique: bool
    min_value: int
    max_value: int
    one_of_enum: str
    def __init__(self, required: _Optional[bool] = ..., min_len: _Optional[int] = ..., max_len: _Optional[int] = ..., one_of: _Optional[_Iterable[str]] = ..., format: _Optional[str] = ..., unique: _Optional[bool] = ..., min_value: _Optional[int] = ..., max_value: _Optional[int] = ..., one_of_enum: _Optional[str] = ...) -> None: ...

class ErrorSpec(_message.Message):
    __slots__ = ("code", "http_status", "grpc_code", "message", "retryable")
    CODE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    http_status: int
    grpc_code: _code_pb2.Code
    message: str
    retryable: bool
    def __init__(self, code: _Optional[str] = ..., http_status: _Optional[int] = ..., grpc_code: _Optional[_Union[_code_pb2.Code, str]] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...
