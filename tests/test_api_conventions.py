"""API-wide conventions, checked on the descriptors so a new resource cannot
drift: timestamps are named like the spec's (`createdAt`, `startedAt`,
`lastActiveAt`, `paidAt`: `*_at` in the proto), enums start with
`*_UNSPECIFIED`, and new cursor lists use `cursor`/`limit`/`items`/`nextCursor`."""

from __future__ import annotations

import pathlib

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
