"""Inputs of every write RPC, built from the contract (the protos' descriptors in gen/python).

For each RPC whose policy declares `write` (`(persona.v1.policy).write`), its HTTP binding
(`google.api.http`: verb, path template, which field is the body) and its request message give:
- the resource kinds it names: a path parameter is of the collection before it (`/messages/{id}`: a chat
  message), a field `<x>_id` of the collection `<x>s` (`persona_id`: a persona) — `references`;
- a valid body once those kinds have ids (an aggregate's fixture made them) — `body`: every required field
  (`(persona.v1.rules).required` or `google.api.field_behavior` REQUIRED), its value from the field's rules:
  the first allowed value (`one_of`, an enum's first value that is not `*_UNSPECIFIED`, by its `wire_name`),
  the smallest allowed number, a string within its lengths in its `format`, a message's own required fields;
  an update that requires nothing but its resource sets its first plain string field, so it changes something.

What the contract cannot say is in `OVERRIDES` (per RPC) and `SAMPLES` (per field name), each with why. A
required field nothing here can fill (a `google.protobuf.Value`, a raw `HttpBody`, a name of a kind no
collection names) raises `Unresolved`, so a field added to the protos is filled or noticed, never left out.
A fixture that makes an aggregate (or puts it in a state) sends its writes' bodies from here too (`fixture_body`: the
generated body with only what the state needs set over it), so a field added to a creation request reaches the
fixtures as it reaches the operations.
scripts/race_hunt.py calls each RPC with these inputs; tests/scripts/test_contract_inputs.py checks the table
(every write RPC has an input or a reason) and plants a new RPC and a new required field to see them noticed.
The serial oracle (tests/oracle.py's `body`) sends these bodies too, with the fields its end state reads set over
them, and judges what it sends by `invalid` (the same field rules, read the other way).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

REQUIRED_BEHAVIOR = 2  # google.api.FieldBehavior.REQUIRED

# The kind a path parameter names, by the collection segment before it.
COLLECTIONS = {
    "personas": "persona",
    "portraits": "portrait",
    "portrait": "portrait",
    "sessions": "chat_session",
    "messages": "chat_message",
    "webhooks": "webhook_endpoint",
    "deliveries": "webhook_delivery",
    "keys": "api_key",
    "tokens": "scim_token",
    "Users": "scim_user",
    "Groups": "scim_group",
    "listings": "listing",
    "queue": "moderation_review",
    "config": "config_item",
}

SCIM_USER = "urn:ietf:params:scim:schemas:core:2.0:User"
SCIM_GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
SCIM_PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def fresh(prefix: str = "race") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# Field values the rules cannot give (by proto field name): the rules bound only their length.
SAMPLES: dict[str, Callable[[], str]] = {
    # A webhook's target must be an https URL (checked by the service, not a field rule); port 9 discards.
    "url": lambda: "https://127.0.0.1:9/hook",
}

Ids = Mapping[str, str]

# Per-RPC parts of the body the contract cannot say (merged over the generated body), each with why.
OVERRIDES: dict[str, Callable[[Ids], dict[str, Any]]] = {
    # The first allowed plan would downgrade the hunt's organization, whose other operations need Enterprise:
    # a change to its own plan is a valid write that answers the subscription unchanged.
    "ChangeSubscription": lambda ids: {"plan": "enterprise"},
    # `value` is a google.protobuf.Value: the setting's type is the config registry's, not the contract's.
    "UpdateConfigItem": lambda ids: {"value": 0.5, "level": "org"},
    # A completion's model names the persona as `persona://<id>` and needs a user's message to answer (the
    # first allowed role, `system`, alone is refused): neither is a field rule.
    "CreateChatCompletion": lambda ids: {
        "model": f"persona://{ids['persona']}",
        "messages": [{"role": "user", "content": "Hello"}],
    },
    "StreamChatCompletion": lambda ids: {
        "model": f"persona://{ids['persona']}",
        "messages": [{"role": "user", "content": "Hello"}],
    },
    # SCIM's bodies are raw `HttpBody` documents (RFC 7643's schemas), which the protos do not describe.
    "CreateScimUser": lambda ids: {"schemas": [SCIM_USER], "userName": fresh() + "@example.com"},
    "ReplaceScimUser": lambda ids: {"schemas": [SCIM_USER], "userName": fresh() + "@example.com"},
    "PatchScimUser": lambda ids: {
        "schemas": [SCIM_PATCH],
        "Operations": [{"op": "replace", "path": "active", "value": False}],
    },
    "CreateScimGroup": lambda ids: {"schemas": [SCIM_GROUP], "displayName": fresh()},
    "ReplaceScimGroup": lambda ids: {"schemas": [SCIM_GROUP], "displayName": fresh()},
    "PatchScimGroup": lambda ids: {
        "schemas": [SCIM_PATCH],
        "Operations": [{"op": "replace", "path": "displayName", "value": fresh()}],
    },
}


# Kinds an override names that no field's name says (the fixture must make them too).
OVERRIDE_REFS = {"CreateChatCompletion": {"model": "persona"}, "StreamChatCompletion": {"model": "persona"}}


class Unresolved(LookupError):
    """A required field (or a name) the contract gives no value for and no override fills."""


class Refused(ValueError):
    """A body the contract refuses (`invalid`), found before it is sent."""


@dataclass(frozen=True)
class WriteRpc:
    service: str
    name: str
    verb: str  # POST, PATCH, ...
    path: str  # the template, e.g. /v1/chat/sessions/{session_id}/messages/{id}
    body_field: str  # "*" (the request), "" (no body), or the field that is the body
    request: Descriptor
    streaming: bool
    anonymous: bool

    @property
    def idempotent(self) -> bool:
        """Reads an `Idempotency-Key` and answers at once (a write that is neither anonymous nor a stream). A
        stream reads one too (its replay follows the first request's run); the race hunt calls streams once
        each (`race_hunt.others`) and tests/personas/test_personas_sse.py sends one twice at once."""
        return not (self.streaming or self.anonymous)

    @property
    def params(self) -> list[str]:
        return re.findall(r"\{([^}=]+)", self.path)


def write_rpcs(files: Iterable[FileDescriptor] | None = None) -> list[WriteRpc]:
    """Every write RPC of the given proto files (default: every persona.v1 module in gen/python)."""
    from google.api import annotations_pb2
    from persona.v1 import options_pb2

    found = []
    for file in _persona_files() if files is None else files:
        for service in file.services_by_name.values():
            for method in service.methods:
                policy = method.GetOptions().Extensions[options_pb2.policy]
                if not policy.write:
                    continue
                http = method.GetOptions().Extensions[annotations_pb2.http]
                verb = http.WhichOneof("pattern") or ""
                found.append(
                    WriteRpc(
                        service.name,
                        method.name,
                        verb.upper(),
                        getattr(http, verb) if verb else "",
                        http.body,
                        method.input_type,
                        method.server_streaming,
                        policy.anonymous,
                    )
                )
    return found


def _persona_files() -> list[FileDescriptor]:
    import persona.v1

    return [
        importlib.import_module(f"persona.v1.{m.name}").DESCRIPTOR
        for m in pkgutil.iter_modules(persona.v1.__path__)
        if m.name.endswith("_pb2")
    ]


def kind_of(rpc: WriteRpc, name: str) -> str | None:
    """The resource kind a path parameter or a name field (`id`, `<x>_id`) refers to; None: not a name."""
    if name in rpc.params:
        before = rpc.path.split("{" + name)[0].rstrip("/").rsplit("/", 1)[-1]
        return COLLECTIONS.get(before) or _unresolved(rpc, name, f"a parameter after /{before}/ names no kind")
    if name.endswith("_id"):  # a made-up id would miss its resource: a name of no known kind is noticed
        return COLLECTIONS.get(name[:-3] + "s") or _unresolved(rpc, name, f"no collection {name[:-3]}s names a kind")
    return None


def references(rpc: WriteRpc) -> dict[str, str]:
    """The kinds the RPC's path and required body names refer to, by field name (the fixture must make them)."""
    refs = {p: kind for p in rpc.params if (kind := kind_of(rpc, p))} | OVERRIDE_REFS.get(rpc.name, {})
    for field in _body_fields(rpc):
        if _required(field) and field.type == FieldDescriptor.TYPE_STRING and (kind := kind_of(rpc, field.name)):
            refs[field.name] = kind
    return refs


def path(rpc: WriteRpc, ids: Ids) -> str:
    refs = references(rpc)
    return re.sub(r"\{([^}=]+)[^}]*\}", lambda m: ids[refs[m.group(1)]], rpc.path)


def body(rpc: WriteRpc, ids: Ids) -> Any:
    """A valid request body (JSON), or None where the RPC takes none."""
    if not rpc.body_field:
        return None
    override = OVERRIDES.get(rpc.name)
    if rpc.body_field != "*":  # the body is one field's message (a card; SCIM's raw document)
        field = rpc.request.fields_by_name[rpc.body_field]
        if override is not None:
            return override(ids)
        return _value(rpc, field, ids)
    fixed = override(ids) if override is not None else {}
    generated = {
        f.json_name: _value(rpc, f, ids) for f in _body_fields(rpc) if _required(f) and f.json_name not in fixed
    }
    if not generated and rpc.verb == "PATCH":
        generated = _first_plain_string(rpc, ids)
    return {**generated, **fixed}


def named(name: str) -> WriteRpc:
    """The write RPC called `name` (read through `write_rpcs`, which a test may replace with planted descriptors)."""
    found = [rpc for rpc in write_rpcs() if rpc.name == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} write RPCs named {name}")
    return found[0]


def fixture_body(rpc: WriteRpc, ids: Ids, state: Mapping[str, Any] | None = None) -> Any:
    """The body of a fixture's own write (the creation of an aggregate, or the call that puts it in the state
    tried): `body`'s, with only `state` set over it (what that state needs and the contract cannot give: a caller
    says why at each), judged by `invalid` before it is sent (`Refused`). A required field added to the request
    message is so filled in every fixture, as in every operation."""
    sent = body(rpc, ids)
    if state:
        sent = {**sent, **state}
    if wrong := invalid(rpc, sent):
        raise Refused(f"{rpc.service}.{rpc.name}: the fixture's body {sent!r} breaks the contract: {wrong}")
    return sent


def _body_fields(rpc: WriteRpc) -> list[FieldDescriptor]:
    return [f for f in rpc.request.fields if f.name not in rpc.params]


def _required(field: FieldDescriptor) -> bool:
    from google.api import field_behavior_pb2
    from persona.v1 import options_pb2

    options = field.GetOptions()
    return (
        options.Extensions[options_pb2.rules].required
        or REQUIRED_BEHAVIOR in options.Extensions[field_behavior_pb2.field_behavior]
    )


def _first_plain_string(rpc: WriteRpc, ids: Ids) -> dict[str, Any]:
    """An update that requires nothing: its first string field without a fixed set of values (it changes that)."""
    from persona.v1 import options_pb2

    for field in _body_fields(rpc):
        rules = field.GetOptions().Extensions[options_pb2.rules]
        plain = not (rules.one_of or rules.one_of_enum or rules.format or field.name.endswith("_id"))
        if field.type == FieldDescriptor.TYPE_STRING and not field.is_repeated and plain:
            return {field.json_name: _value(rpc, field, ids)}
    return {}


def _value(rpc: WriteRpc, field: FieldDescriptor, ids: Ids) -> Any:
    if not field.is_repeated:
        return _scalar(rpc, field, ids)
    # A list: its lengths count items (the service's reading of `min_len`/`max_len` on a repeated field), at least
    # one; `unique` items are distinct (the allowed values in order, or fresh strings).
    rules = _rules(field)
    count = max(rules.min_len, 1)
    allowed = _allowed(rpc, field)
    if allowed and field.type != FieldDescriptor.TYPE_MESSAGE:
        values = allowed[:count] if rules.unique else [allowed[0]] * count
    else:
        values = [_scalar(rpc, field, ids, item=index) for index in range(count)]
    if len(values) < count or (rules.unique and len({repr(v) for v in values}) < count):
        return _unresolved(rpc, field.name, f"no {count} distinct values within its rules")
    return values


def _rules(field: FieldDescriptor) -> Any:
    from persona.v1 import options_pb2

    return field.GetOptions().Extensions[options_pb2.rules]


def _allowed(rpc: WriteRpc, field: FieldDescriptor) -> list[str]:
    """The values a field allows, in order (`one_of`, then `one_of_enum`'s or its enum's wire names); empty: any."""
    rules = _rules(field)
    allowed = list(rules.one_of)
    if rules.one_of_enum:
        allowed += _wire_names(rpc.request.file.pool.FindEnumTypeByName(rules.one_of_enum))
    if field.enum_type is not None:
        allowed += _wire_names(field.enum_type)
    return allowed


def _formats() -> Mapping[str, Callable[[str], bool]]:
    """The named formats of `(persona.v1.rules).format`, as the service checks them (one definition: its validator's)."""
    from persona_service.kernel.transport.validation import FORMATS

    return FORMATS


def _no_format(value: str) -> bool:
    """A format the service does not name: no value has it."""
    return False


def _scalar(rpc: WriteRpc, field: FieldDescriptor, ids: Ids, item: int | None = None) -> Any:
    """One value of the field (`item`: the index of an item of a list, whose length rules are the list's)."""
    rules = _rules(field)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _message(rpc, field, ids)
    if allowed := _allowed(rpc, field):
        return allowed[0]
    if field.type == FieldDescriptor.TYPE_BOOL:
        return True
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return float(rules.min_value) if rules.HasField("min_value") else 0.5
    if field.type != FieldDescriptor.TYPE_STRING:  # an integer: its smallest allowed value
        return rules.min_value if rules.HasField("min_value") else 1
    if (kind := kind_of(rpc, field.name)) is not None:
        return ids[kind] if kind in ids else _unresolved(rpc, field.name, f"no {kind} in the fixture")
    value = _string(field.name, rules, item)
    if rules.format and not _formats().get(rules.format, _no_format)(value):
        return _unresolved(rpc, field.name, f"no value of format {rules.format!r} within its rules")
    return value


def _string(name: str, rules: Any, item: int | None = None) -> str:
    if name in SAMPLES:
        return SAMPLES[name]()
    if rules.format == "cidr":  # (a list's items distinct: 10.0.0.0/8, 10.1.0.0/16, ...)
        return f"10.{item}.0.0/16" if item else "10.0.0.0/8"
    # A slug: lower-case letters, digits and inner hyphens; each run new (a slug is unique in its workspace).
    value = f"race-{uuid.uuid4().hex[:10]}" if rules.format == "slug" else f"Race {uuid.uuid4().hex[:10]}"
    if item is not None:  # (an item of a list: the lengths are the list's)
        return value
    value = value.ljust(rules.min_len, "x")
    return value[: rules.max_len] if rules.max_len else value


def _message(rpc: WriteRpc, field: FieldDescriptor, ids: Ids) -> dict[str, Any]:
    message = field.message_type
    assert message is not None
    if message.file.package != "persona.v1":  # Value, Struct, HttpBody, Timestamp: the contract gives no shape
        return _unresolved(rpc, field.name, f"a {message.full_name} has no shape in the contract")
    return {f.json_name: _value(rpc, f, ids) for f in message.fields if _required(f)}


def invalid(rpc: WriteRpc, body: Any) -> list[str]:
    """Where a request body breaks the contract (empty: valid): a required field missing, a field the request
    message does not have, a value outside its field's rules (allowed values, lengths, bounds, a named `format`
    such as `cidr` or `slug` as the service checks it; a list's length in items and its `unique` items). A body that is one
    field's message of no persona.v1 shape (SCIM's raw documents) is the service's to judge, not the contract's."""
    if not rpc.body_field:
        return [] if body is None else ["the RPC takes no body"]
    if rpc.body_field != "*":
        message = rpc.request.fields_by_name[rpc.body_field].message_type
        if message is None or message.file.package != "persona.v1":
            return []
        return _invalid_message(rpc, message.fields, body, rpc.body_field)
    return _invalid_message(rpc, _body_fields(rpc), body, "")


def _invalid_message(rpc: WriteRpc, fields: Iterable[FieldDescriptor], body: Any, at: str) -> list[str]:
    if not isinstance(body, dict):
        return [f"{at or 'the body'}: not an object"]
    by_name = {f.json_name: f for f in fields} | {f.name: f for f in fields}
    wrong = [f"{at}{key}: no such field" for key in body if key not in by_name]
    for field in {id(f): f for f in by_name.values()}.values():
        key = field.json_name if field.json_name in body else field.name
        if key not in body:
            wrong += [f"{at}{field.json_name}: required"] if _required(field) else []
            continue
        if field.is_repeated:
            wrong += _invalid_list(rpc, field, body[key], f"{at}{field.json_name}")
        else:
            wrong += _invalid_value(rpc, field, body[key], f"{at}{field.json_name}")
    return wrong


def _invalid_list(rpc: WriteRpc, field: FieldDescriptor, values: Any, at: str) -> list[str]:
    """A repeated field: its lengths count items, `unique` items are distinct, and each item keeps the item rules."""
    if not isinstance(values, list):
        return [f"{at}: not a list"]
    rules = _rules(field)
    if _required(field) and not values:
        return [f"{at}: required"]
    wrong = []
    if values and (len(values) < rules.min_len or (rules.max_len and len(values) > rules.max_len)):
        wrong.append(f"{at}: {len(values)} items, not within [{rules.min_len}, {rules.max_len or '…'}]")
    if rules.unique:
        seen: list[Any] = []
        for index, value in enumerate(values):
            if value in seen:
                wrong.append(f"{at}[{index}]: {value!r} again (its items must be unique)")
            seen.append(value)
    for index, value in enumerate(values):
        wrong += _invalid_value(rpc, field, value, f"{at}[{index}]", item=True)
    return wrong


def _invalid_value(rpc: WriteRpc, field: FieldDescriptor, value: Any, at: str, item: bool = False) -> list[str]:
    """One value (`item`: one item of a list, whose length rules are the list's) against its field's rules."""
    rules = _rules(field)
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        message = field.message_type
        if message is None or message.file.package != "persona.v1":
            return []  # (a Value, a Struct, a Timestamp: no rules of the contract's)
        return _invalid_message(rpc, message.fields, value, at + ".")
    allowed = _allowed(rpc, field)
    if allowed and value not in allowed:
        return [f"{at}: {value!r} not one of {sorted(allowed)}"]
    if isinstance(value, str):
        too_short = not item and (len(value) < rules.min_len or (_required(field) and not value))
        if too_short or (not item and rules.max_len and len(value) > rules.max_len):
            return [f"{at}: {len(value)} characters, not within [{rules.min_len}, {rules.max_len or '…'}]"]
        # (An empty value is absent to the service's format check.)
        if rules.format and value and not _formats().get(rules.format, _no_format)(value):
            return [f"{at}: {value!r} is not a {rules.format}"]
    elif isinstance(value, int | float) and not isinstance(value, bool):
        low = rules.min_value if rules.HasField("min_value") else value
        high = rules.max_value if rules.HasField("max_value") else value
        if not low <= value <= high:
            return [f"{at}: {value} outside [{low}, {high}]"]
    return []


def _wire_names(enum: EnumDescriptor) -> list[str]:
    """An enum's values as the JSON names them (its `wire_name`), in order, bar `*_UNSPECIFIED`."""
    from persona.v1 import options_pb2

    values = [v for v in enum.values if not v.name.endswith("_UNSPECIFIED")]
    return [v.GetOptions().Extensions[options_pb2.wire_name] or v.name for v in values]


def error_statuses() -> dict[str, int]:
    """The error catalogue's HTTP status of each `error.code` (errors.proto's ErrorCode values), for an error a
    stream reports in band after its 200."""
    from persona.v1 import errors_pb2, options_pb2

    specs = [
        v.GetOptions().Extensions[options_pb2.error]
        for v in errors_pb2.DESCRIPTOR.enum_types_by_name["ErrorCode"].values
    ]
    return {spec.code: spec.http_status for spec in specs if spec.code}


def _unresolved(rpc: WriteRpc, name: str, why: str) -> NoReturn:
    raise Unresolved(f"{rpc.service}.{rpc.name}: {name}: {why}")
