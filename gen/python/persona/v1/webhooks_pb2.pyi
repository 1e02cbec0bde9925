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

class WebhookDeliveryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_DELIVERY_STATUS_UNSPECIFIED: _ClassVar[WebhookDeliveryStatus]
    WEBHOOK_DELIVERY_STATUS_PENDING: _ClassVar[WebhookDeliveryStatus]
    WEBHOOK_DELIVERY_STATUS_SUCCEEDED: _ClassVar[WebhookDeliveryStatus]
    WEBHOOK_DELIVERY_STATUS_DEAD_LETTERED: _ClassVar[WebhookDeliveryStatus]
WEBHOOK_DELIVERY_STATUS_UNSPECIFIED: WebhookDeliveryStatus
WEBHOOK_DELIVERY_STATUS_PENDING: WebhookDeliveryStatus
WEBHOOK_DELIVERY_STATUS_SUCCEEDED: WebhookDeliveryStatus
WEBHOOK_DELIVERY_STATUS_DEAD_LETTERED: WebhookDeliveryStatus

class WebhookEndpoint(_message.Message):
    __slots__ = ("id", "url", "events", "description", "enabled", "workspace_id", "created_at", "updated_at", "secret_created_at", "previous_secret_expires_at", "standard_webhooks")
    ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SECRET_CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    STANDARD_WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    enabled: bool
    workspace_id: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    secret_created_at: _timestamp_pb2.Timestamp
    previous_secret_expires_at: _struct_pb2.Value
    standard_webhooks: bool
    def __init__(self, id: _Optional[str] = ..., url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., enabled: _Optional[bool] = ..., workspace_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., secret_created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_secret_expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., standard_webhooks: _Optional[bool] = ...) -> None: ...

class CreateWebhookEndpointRequest(_message.Message):
    __slots__ = ("url", "events", "description", "enabled", "standard_webhooks")
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    STANDARD_WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    enabled: bool
    standard_webhooks: bool
    def __init__(self, url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., enabled: _Optional[bool] = ..., standard_webhooks: _Optional[bool] = ...) -> None: ...

class CreateWebhookEndpointResponse(_message.Message):
    __slots__ = ("endpoint", "secret")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    endpoint: WebhookEndpoint
    secret: str
    def __init__(self, endpoint: _Optional[_Union[WebhookEndpoint, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListWebhookEndpointsRequest(_message.Message):
    __slots__ = ("cursor", "limit")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    limit: int
    def __init__(self, cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWebhookEndpointsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WebhookEndpoint]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[WebhookEndpoint, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetWebhookEndpointRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UpdateWebhookEndpointRequest(_message.Message):
    __slots__ = ("id", "url", "events", "description", "enabled", "standard_webhooks")
    ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    STANDARD_WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    enabled: bool
    standard_webhooks: bool
    def __init__(self, id: _Optional[str] = ..., url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., enabled: _Optional[bool] = ..., standard_webhooks: _Optional[bool] = ...) -> None: ...

class DeleteWebhookEndpointRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteWebhookEndpointResponse(_message.Message):
    __slots__ = ("id", "deleted")
    ID_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    id: str
    deleted: bool
    def __init__(self, id: _Optional[str] = ..., deleted: _Optional[bool] = ...) -> None: ...

class PingWebhookEndpointRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class PingWebhookEndpointResponse(_message.Message):
    __slots__ = ("event_id",)
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    def __init__(self, event_id: _Optional[str] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ("id", "endpoint_id", "event_id", "event_type", "status", "attempt_count", "next_attempt_at", "created_at", "completed_at", "replay_of", "attempts")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: str
    attempt_count: int
    next_attempt_at: _struct_pb2.Value
    created_at: _timestamp_pb2.Timestamp
    completed_at: _struct_pb2.Value
    replay_of: str
    attempts: _containers.RepeatedCompositeFieldContainer[WebhookDeliveryAttempt]
    def __init__(self, id: _Optional[str] = ..., endpoint_id: _Optional[str] = ..., event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., status: _Optional[str] = ..., attempt_count: _Optional[int] = ..., next_attempt_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., replay_of: _Optional[str] = ..., attempts: _Optional[_Iterable[_Union[WebhookDeliveryAttempt, _Mapping]]] = ...) -> None: ...

class WebhookDeliveryAttempt(_message.Message):
    __slots__ = ("attempt", "attempted_at", "status_code", "latency_ms", "response_body", "error", "success")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_BODY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    attempted_at: _timestamp_pb2.Timestamp
    status_code: int
    latency_ms: int
    response_body: str
    error: str
    success: bool
    def __init__(self, attempt: _Optional[int] = ..., attempted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_code: _Optional[int] = ..., latency_ms: _Optional[int] = ..., response_body: _Optional[str] = ..., error: _Optional[str] = ..., success: _Optional[bool] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ("webhook_id", "status", "cursor", "limit")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    status: str
    cursor: str
    limit: int
    def __init__(self, webhook_id: _Optional[str] = ..., status: _Optional[str] = ..., cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class ReplayWebhookDeliveryRequest(_message.Message):
    __slots__ = ("webhook_id", "id")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    id: str
    def __init__(self, webhook_id: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetWebhookEndpointSecretRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WebhookEndpointSecret(_message.Message):
    __slots__ = ("secret", "secret_created_at", "previous_secret", "previous_secret_expires_at")
    SECRET_FIELD_NUMBER: _ClassVar[int]
    SECRET_CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SECRET_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    secret: str
    secret_created_at: _timestamp_pb2.Timestamp
    previous_secret: str
    previous_secret_expires_at: _struct_pb2.Value
    def __init__(self, secret: _Optional[str] = ..., secret_created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., previous_secret: _Optional[str] = ..., previous_secret_expires_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
