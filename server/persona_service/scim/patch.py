"""SCIM PATCH (RFC 7644 §3.5.2) on a canonical document: `add`, `replace`,
`remove` in any letter case, attribute paths with sub-attributes, extension
URNs and value filters, and a path-less value object. What IdPs really send
is accepted too: Entra's `Remove` on `members` with a `value` list removes
exactly those members, its string booleans become booleans (documents.coerce),
and a `replace` through a value filter that matches nothing adds the element
the filter describes (`emails[type eq "work"].value`)."""

from __future__ import annotations

import copy
from typing import Any

from scim2_models.path import AttrPath, CompareOperator, Comparison, FilterNode, LogicalExpr, LogicalOperator, ValuePath

from persona_service.scim.documents import canonical, coerce, key_of
from persona_service.scim.errors import bad_request, invalid_value
from persona_service.scim.filters import element_matches, parse_path
from persona_service.scim.schemas import Attribute, ResourceType

OPS = ("add", "replace", "remove")


def _field(body: dict[str, Any], name: str) -> Any:
    key = key_of(body, name)
    return None if key is None else body[key]


def apply_patch(rt: ResourceType, document: dict[str, Any], body: Any) -> dict[str, Any]:
    """The document after the PatchOp's operations, checked against the schema."""
    operations = _field(body, "Operations") if isinstance(body, dict) else None
    if not isinstance(operations, list) or not operations:
        raise invalid_value("A PatchOp needs a non-empty `Operations` list.")
    doc = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict):
            raise invalid_value("Each operation must be an object.")
        op = str(_field(operation, "op") or "").lower()
        if op not in OPS:
            raise invalid_value(f"Unknown operation {_field(operation, 'op')!r}: use add, replace or remove.")
        path, value = _field(operation, "path"), _field(operation, "value")
        if path:
            _apply(rt, doc, op, str(path), value)
        elif op == "remove":
            raise bad_request("noTarget", "A remove operation needs a path.")
        elif isinstance(value, dict):
            for key, item in value.items():
                extension = rt.schema_for(key) if ":" in key else None
                if extension is not None and extension is not rt.core and isinstance(item, dict):
                    _apply(rt, doc, op, extension.id, item)
                elif key.lower() not in ("schemas", "id", "meta"):
                    _apply(rt, doc, op, key, item)
        else:
            raise invalid_value(f"A path-less {op} needs an object value.")
    return canonical(rt, doc)


def _checked(attribute: Attribute, value: Any, path: str) -> Any:
    violations: list[dict[str, Any]] = []
    coerced = coerce(attribute, value, path, violations)
    if violations:
        raise invalid_value(f"The value of {path} does not match its schema.", violations)
    return coerced


def _apply(rt: ResourceType, doc: dict[str, Any], op: str, path_text: str, value: Any) -> None:
    extension = rt.schema_for(path_text) if ":" in path_text else None
    if extension is not None and extension is not rt.core:  # the whole extension
        if op == "remove":
            doc.pop(extension.id, None)
            return
        if op == "replace":
            doc.pop(extension.id, None)
        if not isinstance(value, dict):
            raise invalid_value(f"{extension.id} takes an object.")
        for name, item in value.items():
            if name.lower() != "schemas":
                _apply(rt, doc, "add" if op == "replace" else op, f"{extension.id}:{name}", item)
        return
    node = parse_path(path_text)
    attr_path: AttrPath = node.attr_path if isinstance(node, ValuePath) else node  # type: ignore[assignment]
    value_filter = node.val_filter if isinstance(node, ValuePath) else None
    sub_name = node.sub_attr if isinstance(node, ValuePath) else attr_path.sub_attr
    attribute = rt.attribute(attr_path.attr, attr_path.uri)
    if attribute is None:
        raise bad_request("invalidPath", f"{path_text!r} names no attribute of a {rt.name}.")
    if attribute.mutability == "readOnly":
        raise bad_request("mutability", f"{attribute.name} is read-only.")
    if attribute.returned == "never":
        return  # write-only (password): accepted, never kept
    schema = rt.schema_for(attr_path.uri)
    host = doc if schema is rt.core or schema is None else doc.setdefault(schema.id, {})
    key = attribute.name
    leaf = attribute.sub(sub_name) if sub_name else None
    if sub_name and leaf is None:
        raise bad_request("invalidPath", f"{attribute.name} has no sub-attribute {sub_name!r}.")

    if value_filter is not None:
        if not attribute.multi_valued:
            raise bad_request("invalidPath", f"{attribute.name} is not multi-valued: it takes no filter.")
        _through_filter(attribute, host, op, value_filter, leaf, value, path_text)
    elif leaf is not None:
        targets = host.get(key) if attribute.multi_valued else [host.setdefault(key, {})]
        for element in targets or []:
            if op == "remove":
                element.pop(leaf.name, None)
            else:
                element[leaf.name] = _checked(leaf, value, path_text)
    elif op == "remove":
        if attribute.multi_valued and value is not None:
            # Entra: remove exactly the listed values (`members` with [{"value": id}]).
            gone = [v.get("value") if isinstance(v, dict) else v for v in (value if isinstance(value, list) else [value])]
            host[key] = [e for e in host.get(key) or [] if not (isinstance(e, dict) and e.get("value") in gone)]
        else:
            host.pop(key, None)
    else:
        new = _checked(attribute, value, path_text)
        if attribute.multi_valued:
            _put_items(host, key, new or [], replace=op == "replace")
        elif attribute.type == "complex" and isinstance(host.get(key), dict) and new is not None:
            host[key].update(new)
        else:
            host[key] = new
    for name in [k for k, v in host.items() if v in (None, [], {})]:
        del host[name]


def _put_items(host: dict[str, Any], key: str, items: list[Any], *, replace: bool) -> None:
    current = [] if replace else list(host.get(key) or [])
    if any(isinstance(i, dict) and i.get("primary") is True for i in items):
        for element in current:
            if isinstance(element, dict):
                element.pop("primary", None)
    for item in items:
        if item not in current:
            current.append(item)
    host[key] = current


def _described(node: FilterNode) -> dict[str, Any] | None:
    """The element an `eq` filter (or an `and` of them) describes, to create it."""
    terms = node.terms if isinstance(node, LogicalExpr) and node.op == LogicalOperator.and_ else (node,)
    element: dict[str, Any] = {}
    for term in terms:
        if not (isinstance(term, Comparison) and term.op == CompareOperator.eq and not term.attr_path.sub_attr):
            return None
        element[term.attr_path.attr] = term.value
    return element


def _through_filter(attribute: Attribute, host: dict[str, Any], op: str, value_filter: FilterNode,
                    leaf: Attribute | None, value: Any, path_text: str) -> None:
    elements = list(host.get(attribute.name) or [])
    matched = [e for e in elements if element_matches(attribute, e, value_filter)]
    if op == "remove":
        if leaf is None:
            host[attribute.name] = [e for e in elements if e not in matched]
            return
        for element in matched:
            element.pop(leaf.name, None)
        return
    if not matched:
        described = _described(value_filter)
        if described is None:
            raise bad_request("noTarget", f"{path_text!r} matches no value.")
        element = _checked(attribute, {**described, **({leaf.name: value} if leaf else value or {})}, path_text)[0]
        _put_items(host, attribute.name, [element], replace=False)
        return
    for element in matched:
        if leaf is not None:
            element[leaf.name] = _checked(leaf, value, path_text)
        else:
            replacement = _checked(attribute, value, path_text)
            element.update(replacement[0] if replacement else {})
    host[attribute.name] = elements
