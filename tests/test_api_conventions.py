"""API-wide conventions, checked on the descriptors so a new resource cannot
drift: timestamps are named like the spec's (`createdAt`, `startedAt`,
`lastActiveAt`, `paidAt`: `*_at` in the proto), enums start with
`*_UNSPECIFIED`, new cursor lists use `cursor`/`limit`/`items`/`nextCursor`,
and no 64-bit integer reaches the JSON surface."""

from __future__ import annotations

import pathlib

from google.api import annotations_pb2  # registers `google.api.http` before any descriptor is parsed
from google.protobuf import descriptor_pb2

DESCRIPTOR = pathlib.Path(__file__).resolve().parents[1] / "gen" / "descriptor.binpb"
# The spec's own names keep theirs (`periodStart`, `periodEnd`, `dueDate`), and
# so do the subscription's period bounds, named after them.
TIMESTAMP_EXCEPTIONS = {"period_start", "period_end", "due_date", "current_period_start", "current_period_end"}


def _our_files():
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR.read_bytes()).file
    return [f for f in files if f.package.startswith("persona.")]


def _messages(messages, prefix=""):
    for message in messages:
        yield prefix + message.name, message
        yield from _messages(message.nested_type, prefix + message.name + ".")


def test_every_timestamp_is_named_like_the_specs():
    wrong = [
        f"{file.name}: {name}.{field.name}"
        for file in _our_files()
        for name, message in _messages(file.message_type)
        for field in message.field
        if field.type_name == ".google.protobuf.Timestamp"
        and not field.name.endswith("_at") and field.name not in TIMESTAMP_EXCEPTIONS
    ]
    assert not wrong, f"name Timestamp fields `<verb>ed_at` (JSON `…At`): {wrong}"


def test_every_enum_starts_with_unspecified():
    for file in _our_files():
        enums = [*file.enum_type, *(e for _, m in _messages(file.message_type) for e in m.enum_type)]
        for enum in enums:
            assert enum.value[0].number == 0 and enum.value[0].name.endswith("_UNSPECIFIED"), enum.name


def test_cursor_lists_use_one_pagination_style():
    for file in _our_files():
        for name, message in _messages(file.message_type):
            fields = {f.name for f in message.field}
            if "next_cursor" in fields:
                assert "items" in fields, f"{name}: a cursor page holds `items`"
            if name.startswith("List") and name.endswith("Request") and "cursor" in fields:
                assert "limit" in fields, f"{name}: a cursor list takes `limit`"


# proto3 JSON prints 64-bit integers as strings (`"15000"`), so none may
# reach the JSON surface (README, Contract decisions: int32/uint32 when the
# range allows, else a double holding a whole number).
SIXTY_FOUR_BIT = {
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64, descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_SINT64, descriptor_pb2.FieldDescriptorProto.TYPE_FIXED64,
    descriptor_pb2.FieldDescriptorProto.TYPE_SFIXED64,
}
# The well-known types print in their own JSON forms (a Timestamp's int64
# `seconds` is an RFC 3339 string's part), except the 64-bit wrappers.
WRAPPED_64_BIT = {".google.protobuf.Int64Value", ".google.protobuf.UInt64Value"}


def _sixty_four_bit_fields(files) -> list[str]:
    """Every 64-bit integer field of a message reachable from an RPC the edge
    transcodes (one with a `google.api.http` binding), request or response."""
    messages = {
        f".{file.package}.{name}": message for file in files for name, message in _messages(file.message_type)
    }
    pending = [
        type_name for file in files if file.package.startswith("persona.")
        for service in file.service for method in service.method
        if method.options.HasExtension(annotations_pb2.http)
        for type_name in (method.input_type, method.output_type)
    ]
    assert pending, "no RPC with a google.api.http binding found"
    seen: set[str] = set()
    found = []
    while pending:
        name = pending.pop()
        if name in seen or name not in messages:
            continue
        seen.add(name)
        for field in messages[name].field:
            if field.type in SIXTY_FOUR_BIT or field.type_name in WRAPPED_64_BIT:
                found.append(f"{name[1:]}.{field.name}")
            elif field.type_name and not field.type_name.startswith(".google.protobuf."):
                pending.append(field.type_name)
    return sorted(found)


def _descriptor_set():
    return descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR.read_bytes())


def test_no_64_bit_integer_reaches_json():
    found = _sixty_four_bit_fields(_descriptor_set().file)
    assert not found, f"64-bit integers print as JSON strings; use int32/uint32 or double: {found}"


def test_the_64_bit_check_finds_a_planted_field():
    files = _descriptor_set().file
    invoice = next(m for f in files if f.package == "persona.v1" for m in f.message_type if m.name == "InvoiceLineItem")
    invoice.field.add(name="planted", number=99, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    assert _sixty_four_bit_fields(files) == ["persona.v1.InvoiceLineItem.planted"]
