"""Strict JSON bodies: a body field the request message lacks is refused by name.

Envoy's gRPC-JSON transcoder drops unknown JSON fields silently (no option
rejects them), so the edge's Lua lists the key paths of a JSON object body in
`x-persona-body-keys` (its own copy: a client's is removed) and the pipeline
checks them here against the message the RPC's `google.api.http` `body`
selects, by JSON name or proto name as the transcoder accepts them. Paths are
dot-separated keys, each percent-encoded beyond `[A-Za-z0-9_]` and followed by
`[]` per array it holds (array elements share a path, so the list is bounded by
the schema, not by the body). Free-form values (maps, Struct, Value, ListValue,
Any) are opaque: the Lua does not walk the ones `free_form_keys` names, and
nothing below any of them is checked here. A list longer than `MAX_LENGTH` comes
as `OVERFLOW`. A raw body (`google.api.HttpBody`: SCIM, uploads) is never
checked, nor one sent to a route that binds none (the transcoder ignores it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from urllib.parse import unquote

from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor, ServiceDescriptor

from persona_service.kernel.errors import ECHO_ITEMS, BadRequest, bounded

HEADER = "x-persona-body-keys"
OVERFLOW = "!"
MAX_LENGTH = 4096  # bytes of the header's value; the Lua's BODY_KEYS_MAX
HTTP_BODY = "google.api.HttpBody"
# Well-known types whose JSON is not a message's object: their insides are not fields.
_WELL_KNOWN = "google.protobuf."
# Of those, the ones whose JSON may be an object or an array (the Lua must not walk them).
_FREE_FORM = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any"}


def _opaque(field: FieldDescriptor) -> bool:
    message = field.message_type
    return message is None or message.GetOptions().map_entry or message.full_name.startswith(_WELL_KNOWN)


@functools.cache
def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """A message's fields by JSON name and by proto name (the transcoder accepts both)."""
    return {**{f.name: f for f in descriptor.fields}, **{f.json_name: f for f in descriptor.fields}}


def body_root(method: MethodDescriptor) -> Descriptor | None:
    """The message a JSON body of this RPC binds to; None when the body is not
    checked: its bindings take none (the transcoder ignores one) or disagree
    on the field, or the body is raw (HttpBody) or free-form."""
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    bodies = {r.body for r in (rule, *rule.additional_bindings) if r.WhichOneof("pattern")}
    if len(bodies) != 1 or not (selector := bodies.pop()):
        return None
    root: Descriptor = method.input_type
    for name in [] if selector == "*" else selector.split("."):
        field = root.fields_by_name[name]
        nested = field.message_type
        if nested is None or _opaque(field) or nested.full_name == HTTP_BODY:
            return None
        root = nested
    return root


@functools.cache
def _root_of(rpc_path: str) -> Descriptor | None:
    """`/persona.v1.PersonaService/CreatePersona` -> its body_root."""
    method = descriptor_pool.Default().FindMethodByName(rpc_path.lstrip("/").replace("/", "."))
    return body_root(method)


def refuse_unknown_fields(rpc_path: str, header: str | None) -> None:
    """400 `bad_request` naming the body fields the RPC's message lacks (the
    answer an unknown query parameter gets from the edge)."""
    if not header:
        return
    root = _root_of(rpc_path)
    if root is None:
        return
    if header == OVERFLOW:
        raise BadRequest(
            f"The request is malformed: the body has too many distinct fields (their paths exceed {MAX_LENGTH} bytes).",
            {"reason": "too_many_fields"},
        )
    unknown = _unknown(root, header)
    if unknown:
        named = ", ".join(f'"{path}"' for path in bounded(list(unknown)))
        raise BadRequest(
            f"The request is malformed: unknown body field{'s' if len(unknown) > 1 else ''} {named}.",
            {"reason": "unknown_fields", "unknownFields": bounded(list(unknown))},
        )


@functools.lru_cache(maxsize=512)
def _unknown(root: Descriptor, header: str) -> tuple[str, ...]:
    """The outermost paths (as the client wrote them) that name no field;
    cached, as clients send the same shapes again and again."""
    unknown: dict[str, None] = {}
    for path in header.split(","):
        segments = [_segment(s) for s in path.split(".")]  # "": the key "" (a list is never empty)
        depth = _unknown_depth(root, [key for key, _ in segments])
        if depth is not None:
            unknown[".".join(key + arrays for key, arrays in segments[:depth + 1])] = None
            if len(unknown) > ECHO_ITEMS:
                break
    return tuple(unknown)


def _unknown_depth(root: Descriptor, keys: list[str]) -> int | None:
    """The index of the first key that names no field, or None."""
    message = root
    for depth, key in enumerate(keys):
        field = _fields(message).get(key)
        if field is None:
            return depth
        nested = field.message_type
        if nested is None or _opaque(field):
            return None  # a free-form value (or a scalar: the transcoder types it)
        message = nested
    return None


def _segment(segment: str) -> tuple[str, str]:
    """A path segment -> the key the client sent (escapes decoded) and its `[]`s."""
    encoded = segment.rstrip("[]")  # `[` and `]` in a key come percent-encoded
    key = unquote(encoded)
    if "\\" in key:
        try:
            key = json.loads(f'"{key}"')
        except ValueError:
            pass
    return key, segment[len(encoded):]


def free_form_keys(services: Iterable[ServiceDescriptor]) -> list[str]:
    """The JSON and proto names of the fields that may hold a free-form object
    or array in any request body: the edge's Lua does not walk their values."""
    names: set[str] = set()
    seen: set[str] = set()

    def walk(message: Descriptor) -> None:
        if message.full_name in seen:
            return
        seen.add(message.full_name)
        for field in message.fields:
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry or field.message_type.full_name in _FREE_FORM:
                names.update((field.name, field.json_name))
            elif not _opaque(field):
                walk(field.message_type)

    for service in services:
        for method in service.methods:
            root = body_root(method)
            if root is not None:
                walk(root)
    return sorted(names)
