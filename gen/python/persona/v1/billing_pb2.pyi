import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
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

class InvoiceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVOICE_STATUS_UNSPECIFIED: _ClassVar[InvoiceStatus]
    INVOICE_STATUS_DRAFT: _ClassVar[InvoiceStatus]
    INVOICE_STATUS_OPEN: _ClassVar[InvoiceStatus]
    INVOICE_STATUS_PAID: _ClassVar[InvoiceStatus]
    INVOICE_STATUS_UNCOLLECTIBLE: _ClassVar[InvoiceStatus]
    INVOICE_STATUS_VOID: _ClassVar[InvoiceStatus]

class SubscriptionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUBSCRIPTION_STATUS_UNSPECIFIED: _ClassVar[SubscriptionStatus]
    SUBSCRIPTION_STATUS_ACTIVE: _ClassVar[SubscriptionStatus]
    SUBSCRIPTION_STATUS_PAST_DUE: _ClassVar[SubscriptionStatus]
INVOICE_STATUS_UNSPECIFIED: InvoiceStatus
INVOICE_STATUS_DRAFT: InvoiceStatus
INVOICE_STATUS_OPEN: InvoiceStatus
INVOICE_STATUS_PAID: InvoiceStatus
INVOICE_STATUS_UNCOLLECTIBLE: InvoiceStatus
INVOICE_STATUS_VOID: InvoiceStatus
SUBSCRIPTION_STATUS_UNSPECIFIED: SubscriptionStatus
SUBSCRIPTION_STATUS_ACTIVE: SubscriptionStatus
SUBSCRIPTION_STATUS_PAST_DUE: SubscriptionStatus

class Subscription(_message.Message):
    __slots__ = ("org_id", "plan", "status", "current_period_start", "current_period_end", "cancel_at_period_end", "price_minor", "currency", "credit_minor")
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    CURRENT_PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    CANCEL_AT_PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    PRICE_MINOR_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    CREDIT_MINOR_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    plan: str
    status: str
    current_period_start: _timestamp_pb2.Timestamp
    current_period_end: _timestamp_pb2.Timestamp
    cancel_at_period_end: bool
    price_minor: int
    currency: str
    credit_minor: float
    def __init__(self, org_id: _Optional[str] = ..., plan: _Optional[str] = ..., status: _Optional[str] = ..., current_period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., current_period_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_at_period_end: _Optional[bool] = ..., price_minor: _Optional[int] = ..., currency: _Optional[str] = ..., credit_minor: _Optional[float] = ...) -> None: ...

class InvoiceLineItem(_message.Message):
    __slots__ = ("description", "quantity", "unit_amount_minor", "amount_minor", "period_start", "period_end", "proration")
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    QUANTITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_AMOUNT_MINOR_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_MINOR_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    PRORATION_FIELD_NUMBER: _ClassVar[int]
    description: str
    quantity: int
    unit_amount_minor: float
    amount_minor: float
    period_start: _timestamp_pb2.Timestamp
    period_end: _timestamp_pb2.Timestamp
    proration: bool
    def __init__(self, description: _Optional[str] = ..., quantity: _Optional[int] = ..., unit_amount_minor: _Optional[float] = ..., amount_minor: _Optional[float] = ..., period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., period_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., proration: _Optional[bool] = ...) -> None: ...

class Invoice(_message.Message):
    __slots__ = ("invoice_id", "stripe_invoice_id", "number", "status", "currency", "amount_due_minor", "amount_paid_minor", "period_start", "period_end", "due_date", "paid_at", "line_items")
    INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    STRIPE_INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_DUE_MINOR_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_PAID_MINOR_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    DUE_DATE_FIELD_NUMBER: _ClassVar[int]
    PAID_AT_FIELD_NUMBER: _ClassVar[int]
    LINE_ITEMS_FIELD_NUMBER: _ClassVar[int]
    invoice_id: str
    stripe_invoice_id: str
    number: str
    status: str
    currency: str
    amount_due_minor: float
    amount_paid_minor: float
    period_start: _timestamp_pb2.Timestamp
    period_end: _timestamp_pb2.Timestamp
    due_date: _timestamp_pb2.Timestamp
    paid_at: _struct_pb2.Value
    line_items: _containers.RepeatedCompositeFieldContainer[InvoiceLineItem]
    def __init__(self, invoice_id: _Optional[str] = ..., stripe_invoice_id: _Optional[str] = ..., number: _Optional[str] = ..., status: _Optional[str] = ..., currency: _Optional[str] = ..., amount_due_minor: _Optional[float] = ..., amount_paid_minor: _Optional[float] = ..., period_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., period_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_date: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paid_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., line_items: _Optional[_Iterable[_Union[InvoiceLineItem, _Mapping]]] = ...) -> None: ...

class InvoicePdfLink(_message.Message):
    __slots__ = ("uri", "expires_at")
    URI_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    uri: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, uri: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSubscriptionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ChangeSubscriptionRequest(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: str
    def __init__(self, plan: _Optional[str] = ...) -> None: ...

class CancelSubscriptionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResumeSubscriptionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListInvoicesRequest(_message.Message):
    __slots__ = ("cursor", "limit")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    limit: int
    def __init__(self, cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListInvoicesResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Invoice]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[Invoice, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetInvoiceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetInvoicePdfRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReceiveStripeEventRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: _httpbody_pb2.HttpBody
    def __init__(self, payload: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class StripeEventReceipt(_message.Message):
    __slots__ = ("event_id", "applied")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    applied: bool
    def __init__(self, event_id: _Optional[str] = ..., applied: _Optional[bool] = ...) -> None: ...
