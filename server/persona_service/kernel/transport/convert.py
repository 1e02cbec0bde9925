"""Small proto ⇄ Python conversions shared by servicers."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import struct_pb2, timestamp_pb2


def page_limit(request) -> int:
    """A cursor list's optional `limit` (0 when omitted: the default page size)."""
    return request.limit if request.HasField("limit") else 0


def timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def optional_time(message, field: str) -> datetime | None:
    """A Timestamp field as an aware datetime, or None when unset."""
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=UTC)


def nullable_time(value: datetime | None) -> struct_pb2.Value:
    """An RFC 3339 string, or JSON null, for fields the JSON must always carry."""
    if value is None:
        return struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)
    stamp = timestamp(value)
    assert stamp is not None
    return struct_pb2.Value(string_value=stamp.ToJsonString())


def struct(value: dict | None) -> struct_pb2.Struct:
    """A JSON object as a google.protobuf.Struct (empty for None)."""
    message = struct_pb2.Struct()
    message.update(value or {})
    return message
