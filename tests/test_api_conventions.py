"""API-wide conventions, checked on the descriptors so a new resource cannot
drift: timestamps are named like the spec's (`createdAt`, `startedAt`,
`lastActiveAt`, `paidAt`: `*_at` in the proto), enums start with
`*_UNSPECIFIED`, every list takes `cursor`/`limit` and answers `items`/`nextCursor`,
no 64-bit integer reaches the JSON surface, path variables follow one naming
rule and custom methods one style, and every state in a response declares its
closed set (docs/contract-decisions.md)."""

from __future__ import annotations

import pathlib
import re

import pytest
from google.api import annotations_pb2  # registers `google.api.http` before any descriptor is parsed
from google.protobuf import descriptor_pb2
from persona.v1 import options_pb2  # registers `persona.v1.policy` likewise

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


# Lists of other protocols keep theirs: SCIM's (RFC 7644: `startIndex`/`count`
# → `Resources`) and OpenAI's (`{"object": "list", "data": [...]}`).
FOREIGN_LISTS = {"ListResourceTypes", "ListSchemas", "ListScimUsers", "ListScimGroups", "ListModels"}
_FIELD = descriptor_pb2.FieldDescriptorProto


def _list_style(field) -> tuple | None:
    """What a list's paging field must be, field by field
    (docs/contract-decisions.md: one list style): its type, whether it has presence, its bounds."""
    rules = field.options.Extensions[options_pb2.rules]
    return field.type, field.label, field.proto3_optional, rules.max_len, rules.min_value, rules.max_value


LIST_STYLE = {
    "cursor": (_FIELD.TYPE_STRING, _FIELD.LABEL_OPTIONAL, False, 1000, 0, 0),
    "limit": (_FIELD.TYPE_INT32, _FIELD.LABEL_OPTIONAL, True, 0, 1, 100),
}


def _list_style_violations(files) -> list[str]:
    """Every List* RPC of ours: the request has `cursor` and `limit` (and
    filters, never another paging field), the response exactly `items` and
    `next_cursor` (JSON `nextCursor`)."""
    messages = {f".{f.package}.{name}": m for f in files for name, m in _messages(f.message_type)}
    wrong = []
    for file in files:
        if not file.package.startswith("persona."):
            continue
        for method in (m for s in file.service for m in s.method if m.name.startswith("List")):
            if method.name in FOREIGN_LISTS:
                continue
            request = {f.name: f for f in messages[method.input_type].field}
            for name, style in LIST_STYLE.items():
                if name not in request or _list_style(request[name]) != style:
                    wrong.append(f"{method.name}: request `{name}`")
            paging = {"page_size", "page_token", "offset", "page", "per_page", "after", "before"} & set(request)
            wrong += [f"{method.name}: request `{name}`" for name in sorted(paging)]
            response = {f.name: f for f in messages[method.output_type].field}
            items, next_cursor = response.get("items"), response.get("next_cursor")
            if (set(response) != {"items", "next_cursor"} or items is None or items.label != _FIELD.LABEL_REPEATED
                    or next_cursor is None or next_cursor.type != _FIELD.TYPE_STRING):
                wrong.append(f"{method.name}: response {sorted(response)}")
    return wrong


def test_every_list_has_one_style():
    wrong = _list_style_violations(_descriptor_set().file)
    assert not wrong, f"lists take `cursor` (max 1000) and `limit` (optional, 1–100), answer `items` + `nextCursor`: {wrong}"


def _field(files, message: str, name: str):
    return next(field for f in files if f.package == "persona.v1" for m in f.message_type if m.name == message
                for field in m.field if field.name == name)


@pytest.mark.parametrize("plant,expected", [
    (lambda files: setattr(_field(files, "ListPersonasRequest", "limit"), "name", "page_size"),
     ["ListPersonas: request `limit`", "ListPersonas: request `page_size`"]),
    (lambda files: _field(files, "ListEventsRequest", "limit").ClearField("proto3_optional"),
     ["ListEvents: request `limit`"]),
    (lambda files: setattr(_field(files, "ListApiKeysRequest", "limit").options.Extensions[options_pb2.rules],
                           "max_value", 1000), ["ListApiKeys: request `limit`"]),
    (lambda files: setattr(_field(files, "ListChatSessionsResponse", "items"), "name", "sessions"),
     ["ListChatSessions: response ['next_cursor', 'sessions']"]),
    (lambda files: setattr(_field(files, "ListInvoicesResponse", "next_cursor"), "name", "next_page_token"),
     ["ListInvoices: response ['items', 'next_page_token']"]),
])
def test_the_list_style_check_finds_a_planted_violation(plant, expected):
    files = _descriptor_set().file
    plant(files)
    assert _list_style_violations(files) == expected


# proto3 JSON prints 64-bit integers as strings (`"15000"`), so none may
# reach the JSON surface (docs/contract-decisions.md: int32/uint32 when the
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


def _bindings(files):
    """(method, verb, path template) of every `google.api.http` binding."""
    for file in files:
        if not file.package.startswith("persona."):
            continue
        for service in file.service:
            for method in service.method:
                if method.options.HasExtension(annotations_pb2.http):
                    rule = method.options.Extensions[annotations_pb2.http]
                    for binding in (rule, *rule.additional_bindings):
                        verb = binding.WhichOneof("pattern")
                        yield method, verb, getattr(binding, verb)


def _singular(word: str) -> str:
    return word[:-3] + "y" if word.endswith("ies") else word.removesuffix("s")


# Keys that are not ids keep their own names: a config item's `{key}`, a
# file's `{key=**}`, a dashboard asset's `{name}`, OpenAI's `{model}`, a
# persona version's number `{version}`.
NATURAL_KEYS = {"key", "name", "model", "version"}


def _path_variable_violations(files) -> list[str]:
    """The naming rule: the variable naming the resource an RPC acts on (its
    policy's `resource_type`, which the audit log reads from the request's
    `id`) is `{id}`; a variable naming a parent is `{<parent>_id}`, the
    parent's collection in the singular (`/v1/personas/{persona_id}/portraits/{id}`)."""
    wrong = []
    for method, _, template in _bindings(files):
        resource = method.options.Extensions[options_pb2.policy].resource_type
        segments = template.split(":")[0].strip("/").split("/")
        variables = [i for i, s in enumerate(segments) if s.startswith("{")]
        for i in variables:
            name = segments[i].strip("{}").split("=")[0]
            parent = f"{_singular(segments[i - 1])}_id"
            child = _singular(segments[i + 1]) if i + 1 < len(segments) else ""
            if i != variables[-1]:
                ok = name == parent
            elif name == "id":  # its own id, unless a child collection of `resource` follows
                ok = not (child and resource.endswith(child))
            else:  # a parent's id above the child collection acted on, or a natural key
                ok = name in NATURAL_KEYS or (name == parent and bool(child) and resource.endswith(child))
            if not ok:
                wrong.append(f"{method.name}: {template}")
    return sorted(set(wrong))


def test_path_variables_follow_one_naming_rule():
    wrong = _path_variable_violations(_descriptor_set().file)
    assert not wrong, f"a resource's own id is `{{id}}`, a parent's `{{<parent>_id}}`: {wrong}"


# Custom methods are written as the spec writes its own (`/refine`, `/ping`,
# `/replay`, `/edit`, `/rotate-secrets`): a lowercase, kebab-case path segment
# after the resource. `:stream` is no verb: it is the server-sent-events twin
# of a method (two RPCs cannot share a verb and path), which clients reach with
# `?stream=true` or `"stream": true`. SCIM's segments are RFC 7644's.
SEGMENT = re.compile(r"^[a-z][a-z0-9-]*$")
FOREIGN_SEGMENTS = ("/v1/auth/scim/v2/",)


def _custom_method_violations(files) -> list[str]:
    streaming = {m.name for f in files for s in f.service for m in s.method if m.server_streaming}
    wrong = []
    for method, _, template in _bindings(files):
        path, _, suffix = template.partition(":")
        if suffix and not (suffix == "stream" and method.name in streaming):
            wrong.append(f"{method.name}: {template}")
        if template.startswith(FOREIGN_SEGMENTS):
            continue
        literals = [s for s in path.strip("/").split("/") if not s.startswith("{")]
        if any(not SEGMENT.match(s) for s in literals if s != "openapi.json"):
            wrong.append(f"{method.name}: {template}")
    return sorted(set(wrong))


def test_custom_methods_are_written_one_way():
    wrong = _custom_method_violations(_descriptor_set().file)
    assert not wrong, f"custom methods are `POST …/{{id}}/<verb>`, kebab-case: {wrong}"


def _plant(files, method_name: str, template: str) -> None:
    method = next(m for f in files for s in f.service for m in s.method if m.name == method_name)
    rule = method.options.Extensions[annotations_pb2.http]
    setattr(rule, rule.WhichOneof("pattern"), template)


@pytest.mark.parametrize("method,template", [
    ("GetInvoice", "/v1/billing/invoices/{invoice_id}"),  # its own id, named after it
    ("ListWebhookDeliveries", "/v1/webhooks/{id}/deliveries"),  # the parent called `{id}`
    ("ReplayWebhookDelivery", "/v1/webhooks/{id}/deliveries/{delivery_id}/replay"),
    ("GetPortrait", "/v1/personas/{pid}/portraits/{id}"),
])
def test_the_naming_check_finds_a_planted_variable(method, template):
    files = _descriptor_set().file
    _plant(files, method, template)
    assert _path_variable_violations(files) == [f"{method}: {template}"]


@pytest.mark.parametrize("method,template", [
    ("RevokeApiKey", "/v1/keys/{id}:revoke"),
    ("ArchivePersona", "/v1/personas/{id}/archiveNow"),
    ("GetPersona", "/v1/personas/{id}:stream"),  # `:stream` only on a streaming method
])
def test_the_custom_method_check_finds_a_planted_verb(method, template):
    files = _descriptor_set().file
    _plant(files, method, template)
    assert _custom_method_violations(files) == [f"{method}: {template}"]


# A status, state, kind, outcome or decision is a closed set: the response
# field names its enum (`(rules).one_of_enum`, the values' `wire_name`s being
# the spec's spellings) or lists its values (`one_of`). It stays a string on
# the wire because Envoy prints an enum by its value's proto name
# (`CHAT_SESSION_STATUS_ACTIVE`), never the spec's `active`.
STATE_FIELDS = re.compile(r"^(status|state|kind|outcome|decision)$|_(status|state|kind)$")


def _undeclared_states(files) -> list[str]:
    messages = {
        f".{file.package}.{name}": message for file in files for name, message in _messages(file.message_type)
    }
    pending = [method.output_type for method, _, _ in _bindings(files)]
    seen: set[str] = set()
    found = []
    while pending:
        name = pending.pop()
        if name in seen or name not in messages:
            continue
        seen.add(name)
        for field in messages[name].field:
            if field.type_name and not field.type_name.startswith(".google."):
                pending.append(field.type_name)
            rules = field.options.Extensions[options_pb2.rules]
            if (field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING and STATE_FIELDS.search(field.name)
                    and not (rules.one_of or rules.one_of_enum)):
                found.append(f"{name[1:]}.{field.name}")
    return sorted(found)


def test_every_state_in_a_response_declares_its_closed_set():
    found = _undeclared_states(_descriptor_set().file)
    assert not found, f"declare the values (an enum with wire_names, `(rules).one_of_enum`): {found}"


def test_the_state_check_finds_a_planted_field():
    files = _descriptor_set().file
    invoice = next(m for f in files if f.package == "persona.v1" for m in f.message_type if m.name == "Invoice")
    next(f for f in invoice.field if f.name == "status").options.ClearExtension(options_pb2.rules)
    invoice.field.add(name="refund_state", number=99, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    assert _undeclared_states(files) == ["persona.v1.Invoice.refund_state", "persona.v1.Invoice.status"]


def test_the_specs_named_states_are_the_declared_sets():
    """The spec's named states (States and transitions) are exactly the enums'
    wire names, in the spec's order."""
    enums = {e.name: e for f in _descriptor_set().file if f.package == "persona.v1" for e in f.enum_type}

    def wire_names(enum: str) -> list[str]:
        return [v.options.Extensions[options_pb2.wire_name] for v in enums[enum].value if v.number]

    assert wire_names("PortraitStatus") == ["pending", "generating", "generated", "approved", "rejected", "failed"]
    assert wire_names("ChatSessionStatus") == ["active", "ended", "archived"]
    assert wire_names("InvoiceStatus") == ["draft", "open", "paid", "uncollectible", "void"]
