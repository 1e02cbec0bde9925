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

class ListingStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LISTING_STATUS_UNSPECIFIED: _ClassVar[ListingStatus]
    LISTING_STATUS_PENDING_REVIEW: _ClassVar[ListingStatus]
    LISTING_STATUS_PUBLISHED: _ClassVar[ListingStatus]
    LISTING_STATUS_REJECTED: _ClassVar[ListingStatus]
    LISTING_STATUS_UNPUBLISHED: _ClassVar[ListingStatus]
LISTING_STATUS_UNSPECIFIED: ListingStatus
LISTING_STATUS_PENDING_REVIEW: ListingStatus
LISTING_STATUS_PUBLISHED: ListingStatus
LISTING_STATUS_REJECTED: ListingStatus
LISTING_STATUS_UNPUBLISHED: ListingStatus

class Listing(_message.Message):
    __slots__ = ("id", "persona_id", "title", "description", "audience_tags", "price_minor", "currency", "status", "rejection_reason", "mine", "created_at", "updated_at", "published_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_TAGS_FIELD_NUMBER: _ClassVar[int]
    PRICE_MINOR_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REJECTION_REASON_FIELD_NUMBER: _ClassVar[int]
    MINE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    persona_id: str
    title: str
    description: str
    audience_tags: _containers.RepeatedScalarFieldContainer[str]
    price_minor: int
    currency: str
    status: str
    rejection_reason: str
    mine: bool
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    published_at: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., persona_id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., audience_tags: _Optional[_Iterable[str]] = ..., price_minor: _Optional[int] = ..., currency: _Optional[str] = ..., status: _Optional[str] = ..., rejection_reason: _Optional[str] = ..., mine: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., published_at: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Purchase(_message.Message):
    __slots__ = ("id", "listing_id", "persona_id", "invoice_id", "amount_minor", "currency", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    LISTING_ID_FIELD_NUMBER: _ClassVar[int]
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_MINOR_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    listing_id: str
    persona_id: str
    invoice_id: str
    amount_minor: int
    currency: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., listing_id: _Optional[str] = ..., persona_id: _Optional[str] = ..., invoice_id: _Optional[str] = ..., amount_minor: _Optional[int] = ..., currency: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateListingRequest(_message.Message):
    __slots__ = ("persona_id", "title", "description", "audience_tags", "price_minor", "currency")
    PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_TAGS_FIELD_NUMBER: _ClassVar[int]
    PRICE_MINOR_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    persona_id: str
    title: str
    description: str
    audience_tags: _containers.RepeatedScalarFieldContainer[str]
    price_minor: int
    currency: str
    def __init__(self, persona_id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., audience_tags: _Optional[_Iterable[str]] = ..., price_minor: _Optional[int] = ..., currency: _Optional[str] = ...) -> None: ...

class ListListingsRequest(_message.Message):
    __slots__ = ("audience_tag", "q", "mine", "cursor", "limit")
    AUDIENCE_TAG_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    MINE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    audience_tag: str
    q: str
    mine: bool
    cursor: str
    limit: int
    def __init__(self, audience_tag: _Optional[str] = ..., q: _Optional[str] = ..., mine: _Optional[bool] = ..., cursor: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListListingsResponse(_message.Message):
    __slots__ = ("items", "next_cursor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[Listing]
    next_cursor: str
    def __init__(self, items: _Optional[_Iterable[_Union[Listing, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class GetListingRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UpdateListingRequest(_message.Message):
    __slots__ = ("id", "title", "description", "audience_tags", "price_minor")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_TAGS_FIELD_NUMBER: _ClassVar[int]
    PRICE_MINOR_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    description: str
    audience_tags: _containers.RepeatedScalarFieldContainer[str]
    price_minor: int
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., audience_tags: _Optional[_Iterable[str]] = ..., price_minor: _Optional[int] = ...) -> None: ...

class UnpublishListingRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class PurchaseListingRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
