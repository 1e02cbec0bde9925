"""SCIM documents: a request's resource checked against its schema and put
in canonical form (the schema's attribute names, booleans as booleans, plural
attributes as lists, nulls dropped), and a stored resource rendered with
`attributes` / `excludedAttributes` applied (RFC 7644 §3.9)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from persona_service.scim.errors import bad_request, invalid_value
from persona_service.scim.json_support import JSONObject, as_object, object_at, objects_in, text
from persona_service.scim.schemas import Attribute, ResourceType

# Attributes the service sets: ignored in requests (RFC 7643 §2.2 readOnly).
_SERVER_SET = {"id", "meta", "schemas"}
_TRUE, _FALSE = {"true"}, {"false"}


# No SCIM message nests deeper than a handful of levels; a body nested deeper
# is refused before any walk over it (json, copy, ==) can recurse out of stack.
MAX_DEPTH = 32


def parse_json(data: bytes) -> object:
    try:
        value = json.loads(data or b"null")
        too_deep = not _depth_within(value, MAX_DEPTH)
    except (ValueError, UnicodeDecodeError):
        raise bad_request("invalidSyntax", "The body is not JSON.") from None
    except RecursionError:  # deeper than the parser's own stack
        too_deep = True
    if too_deep:
        raise bad_request("invalidSyntax", f"The body nests deeper than {MAX_DEPTH} levels.")
    return value


def _depth_within(value: object, limit: int) -> bool:
    """Whether objects and arrays nest at most `limit` deep (iterative: the
    check itself never recurses)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children: Iterable[object] | None = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None)
        if children is None:
            continue
        if depth > limit:
            return False
        pending.extend((child, depth + 1) for child in children)
    return True


@dataclass(frozen=True, slots=True)
class Canonical:
    """A resource `canonical` checked against its schema: each attribute holds its schema's type (scim.json_support's
    readers find that or nothing), and the naming attribute, a non-blank string, is typed as one."""

    document: JSONObject
    name: str  # the resource type's naming attribute (userName, displayName)


def canonical(rt: ResourceType, raw: object) -> Canonical:
    """The resource in canonical form; 422 invalidValue listing every violation."""
    body = as_object(raw)
    if body is None:
        raise invalid_value(f"The body must be a SCIM {rt.name} object.")
    violations: list[JSONObject] = []
    doc: JSONObject = {}
    for key, value in body.items():
        if key.lower() in _SERVER_SET or value is None:
            continue
        extension = rt.schema_for(key) if ":" in key else None
        if extension is not None and extension is not rt.core:
            given = as_object(value)
            if given is None:
                violations.append({"path": key, "code": "type", "expected": "complex"})
                continue
            sub: JSONObject = {}
            for name, item in given.items():
                attribute = extension.attribute(name)
                if attribute is not None and item is not None:
                    sub[attribute.name] = coerce(attribute, item, f"{key}:{name}", violations)
            if sub := {k: v for k, v in sub.items() if v is not None}:
                doc[extension.id] = sub
            continue
        attribute = rt.attribute(key)
        if attribute is None or attribute.mutability == "readOnly" or attribute.returned == "never":
            continue  # unknown attributes are ignored; readOnly ones are the server's; passwords never kept
        coerced = coerce(attribute, value, attribute.name, violations)
        if coerced is not None:
            doc[attribute.name] = coerced
    naming = text(doc, rt.naming)
    if naming is None or not naming.strip():
        violations.append({"path": rt.naming, "code": "required"})
    if violations or naming is None:
        raise invalid_value(f"The {rt.name} does not match its schema: " + ", ".join(
            f"{v['path']} ({v['code']})" for v in violations), violations)
    return Canonical(doc, naming)


def coerce(attribute: Attribute, value: object, path: str, violations: list[JSONObject]) -> object:
    """One attribute's value in canonical form (None: unassigned)."""
    if attribute.multi_valued:
        items = value if isinstance(value, list) else [value]
        values = [_coerce_one(attribute, item, path, violations) for item in items if item is not None]
        return [v for v in values if v is not None] or None
    if attribute.type == "complex" and attribute.sub("value") is not None and not isinstance(value, dict | list):
        # Entra sends a singular complex reference (the enterprise `manager`) as
        # its bare `value`; an empty one unassigns it.
        if value == "":
            return None
        value = {"value": value}
    return _coerce_one(attribute, value, path, violations)


def _coerce_one(attribute: Attribute, value: object, path: str, violations: list[JSONObject]) -> object:
    """One value (an element, for a multi-valued attribute) in canonical form."""
    if attribute.type == "complex":
        given = as_object(value)
        if given is None:
            violations.append({"path": path, "code": "type", "expected": "complex"})
            return None
        out: JSONObject = {}
        for name, item in given.items():
            sub = attribute.sub(name)
            if sub is not None and item is not None and sub.returned != "never":
                coerced = coerce(sub, item, f"{path}.{sub.name}", violations)
                if coerced is not None:
                    out[sub.name] = coerced
        return out or None
    if attribute.type == "boolean":
        # Entra sends booleans as the strings "True" / "False".
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        if isinstance(value, bool):
            return value
    elif attribute.type == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif attribute.type == "decimal":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    elif isinstance(value, str):  # string, reference, binary, dateTime
        return value
    violations.append({"path": path, "code": "type", "expected": attribute.type})
    return None


def _split(names: str) -> list[str]:
    return [n.strip() for n in names.split(",") if n.strip()]


def project(rt: ResourceType, resource: JSONObject, attributes: str, excluded: str) -> JSONObject:
    """The resource with only the requested attributes (`id` and `schemas` always),
    or without the excluded ones. Names may carry a sub-attribute and a schema URN."""
    wanted, unwanted = _split(attributes), _split(excluded)
    if not wanted and not unwanted:
        return resource
    if wanted:
        out = {k: v for k, v in resource.items() if k in ("id", "schemas")}
        for name in wanted:
            _copy(rt, resource, out, name)
        return out
    rest: JSONObject = json.loads(json.dumps(resource))  # a copy (json.loads of an object is one)
    for name in unwanted:
        _drop(rt, rest, name)
    return rest


def _locate(rt: ResourceType, name: str) -> tuple[str | None, str, str | None]:
    """(extension URN or None, attribute, sub-attribute) of `[urn:]attr[.sub]`."""
    uri = None
    lowered = name.lower()
    for schema in (rt.core, *rt.extensions):
        if lowered.startswith(schema.id.lower() + ":"):
            uri, name = (None if schema is rt.core else schema.id), name[len(schema.id) + 1:]
            break
    attr, _, sub = name.partition(".")
    return uri, attr, sub or None


def _host(resource: JSONObject, uri: str | None) -> JSONObject | None:
    return as_object(resource.get(uri)) if uri else resource


def key_of(host: JSONObject, name: str) -> str | None:
    """The key naming `name` in any letter case (SCIM names are case-insensitive)."""
    return next((k for k in host if k.lower() == name.lower()), None)


def _copy(rt: ResourceType, resource: JSONObject, out: JSONObject, name: str) -> None:
    uri, attr, sub = _locate(rt, name)
    host = _host(resource, uri)
    key = key_of(host, attr) if host else None
    if host is None or key is None:
        return
    target = object_at(out, uri) if uri else out
    value = host[key]
    if sub is None:
        target[key] = value
    elif isinstance(value, list):
        target[key] = [{k: v for k, v in item.items() if k.lower() == sub.lower()} for item in objects_in(value)]
    elif (found := as_object(value)) is not None:
        object_at(target, key).update({k: v for k, v in found.items() if k.lower() == sub.lower()})


def _drop(rt: ResourceType, resource: JSONObject, name: str) -> None:
    uri, attr, sub = _locate(rt, name)
    attribute = rt.attribute(attr, uri)
    if attribute is not None and attribute.returned == "always":
        return
    host = _host(resource, uri)
    key = key_of(host, attr) if host else None
    if host is None or key is None:
        return
    if sub is None:
        del host[key]
        return
    value = host[key]
    for item in objects_in(value if isinstance(value, list) else [value]):
        if (found := key_of(item, sub)) is not None:
            del item[found]
