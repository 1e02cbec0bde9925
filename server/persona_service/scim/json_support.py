"""JSON as SCIM carries it (documents, their elements, request bodies): objects whose values stay `object`
until the code that reads one checks it, through these readers. A canonical document (scim.documents.canonical)
holds only its schema's types, so there a reader finds what the schema says or nothing."""

from __future__ import annotations

from collections.abc import Iterable

from persona_service.kernel.api import JSONObject, as_object

__all__ = ["JSONObject", "as_object", "flag", "items", "object_at", "objects", "objects_in", "text"]


def objects_in(values: Iterable[object]) -> list[JSONObject]:
    """The objects among `values` (the same objects: a write to one is a write to the document)."""
    return [value for value in values if isinstance(value, dict)]


def object_at(host: JSONObject, key: str) -> JSONObject:
    """`host[key]`, an object, made (empty) when absent (in a canonical document an object's place holds one)."""
    found = as_object(host.get(key))
    if found is None:
        found = host[key] = {}
    return found


def items(doc: JSONObject, name: str) -> list[object]:
    """A multi-valued attribute's values, a new list (none: unassigned, or not a list)."""
    value = doc.get(name)
    return list(value) if isinstance(value, list) else []


def objects(doc: JSONObject, name: str) -> list[JSONObject]:
    """A multi-valued complex attribute's elements (the same objects as the document's)."""
    return objects_in(items(doc, name))


def text(doc: JSONObject, name: str) -> str | None:
    """A string attribute's value (None: unassigned, or not a string)."""
    value = doc.get(name)
    return value if isinstance(value, str) else None


def flag(doc: JSONObject, name: str, default: bool) -> bool:
    """A boolean attribute's value (`default`: unassigned, or not a boolean)."""
    value = doc.get(name)
    return value if isinstance(value, bool) else default
