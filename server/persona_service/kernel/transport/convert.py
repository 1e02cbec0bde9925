"""Small proto ⇄ Python conversions shared by servicers."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol, cast

import grpc
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from persona_service.kernel.json_values import JSONObject

if TYPE_CHECKING:
    from google.protobuf.internal.well_known_types import _StructValueArg


def text_metadata(context: grpc.ServicerContext) -> dict[str, str]:
    """The call's text headers by name, the last of a repeated one winning as
    with dict(); binary (-bin) headers, the only ones gRPC gives as bytes, are left out."""
    return {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}


class _Paged(Protocol):
    """A list request: its optional `limit` (any generated message with one)."""

    limit: int

    def HasField(self, field_name: Literal["limit"]) -> bool: ...  # (a generated HasField takes its field names)


def page_limit(request: _Paged) -> int:
    """A cursor list's optional `limit` (0 when omitted: the default page size)."""
    return request.limit if request.HasField("limit") else 0


INT32_MAX = 2**31 - 1


def int32(value: int) -> int:
    """A 64-bit column's value for an int32 field (docs/contract-decisions.md:
    the JSON surface has no 64-bit integers), saturated at the int32 bounds
    instead of failing the call; the field's comment states its range."""
    return max(-INT32_MAX - 1, min(INT32_MAX, value))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    if value.tzinfo is None:  # a naive value is local time (as astimezone reads it)
        value = value.astimezone(UTC)
    # Seconds and nanos straight from the difference (half the cost of Timestamp.FromDatetime; every
    # answer holds a few timestamps): timedelta normalizes as Timestamp does, nanos in [0, 1e9).
    delta = value - _EPOCH
    return timestamp_pb2.Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def optional_time(message: Message, field: str) -> datetime | None:
    """A Timestamp field as an aware datetime, or None when unset."""
    if not message.HasField(field):
        return None
    stamp: datetime = getattr(message, field).ToDatetime(tzinfo=UTC)
    return stamp


def nullable_time(value: datetime | None) -> struct_pb2.Value:
    """An RFC 3339 string, or JSON null, for fields the JSON must always carry."""
    if value is None:
        return struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    stamp = timestamp(value)
    assert stamp is not None
    return struct_pb2.Value(string_value=stamp.ToJsonString())


def message_json(message: Message) -> JSONObject:
    """A message as the edge's transcoder prints it, for JSON built here (SSE
    frames, error details): lowerCamel names, zero values printed, and whole
    doubles as integers (`354`, where Python would write `354.0`), so that a
    field has one JSON form whichever path carries it."""
    printed = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return {key: _whole_numbers(item) for key, item in printed.items()}


def _whole_numbers(value: object) -> object:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def struct(value: Mapping[str, object] | None) -> struct_pb2.Struct:
    """A JSON object as a google.protobuf.Struct (empty for None)."""
    message = struct_pb2.Struct()
    # The Struct checks each value itself (ValueError on one that is no JSON value); its stub spells that type.
    message.update(cast("Mapping[str, _StructValueArg]", value or {}))
    return message
