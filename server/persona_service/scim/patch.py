"""SCIM PATCH (RFC 7644 §3.5.2) on a canonical document: `add`, `replace`,
`remove` in any letter case, attribute paths with sub-attributes, extension
URNs and value filters, and a path-less value object. What IdPs really send
is accepted too: Entra's `Remove` on `members` with a `value` list removes
exactly those members, its string booleans become booleans (documents.coerce),
and a `replace` through a value filter that matches nothing adds the element
the filter describes (`emails[type eq "work"].value`)."""

from __future__ import annotations

import copy

from scim2_models.path import CompareOperator, Comparison, FilterNode, LogicalExpr, LogicalOperator, ValuePath

from persona_service.scim.documents import Canonical, canonical, coerce, key_of
from persona_service.scim.errors import bad_request, invalid_value
from persona_service.scim.filters import element_matches, parse_path
from persona_service.scim.json_support import JSONObject, as_object, items, object_at, objects, objects_in
from persona_service.scim.schemas import Attribute, ResourceType

OPS = ("add", "replace", "remove")


def _field(body: JSONObject, name: str) -> object:
    key = key_of(body, name)
    return None if key is None else body[key]


def apply_patch(rt: ResourceType, document: JSONObject, body: object) -> Canonical:
    """The document after the PatchOp's operations, checked against the schema."""
    patch_op = as_object(body)
    operations = _field(patch_op, "Operations") if patch_op is not None else None
    if not isinstance(operations, list) or not operations:
        raise invalid_value("A PatchOp needs a non-empty `Operations` list.")
    doc = copy.deepcopy(document)
    for each in operations:
        operation = as_object(each)
        if operation is None:
            raise invalid_value("Each operation must be an object.")
        op = str(_field(operation, "op") or "").lower()
        if op not in OPS:
            raise invalid_value(f"Unknown operation {_field(operation, 'op')!r}: use add, replace or remove.")
        path, value = _field(operation, "path"), _field(operation, "value")
        if path:
            _apply(rt, doc, op, str(path), value)
        elif op == "remove":
            raise bad_request("noTarget", "A remove operation needs a path.")
        elif (attributes := as_object(value)) is not None:
            for key, item in attributes.items():
                extension = rt.schema_for(key) if ":" in key else None
                if extension is not None and extension is not rt.core and as_object(item) is not None:
                    _apply(rt, doc, op, extension.id, item)
                elif key.lower() not in ("schemas", "id", "meta"):
                    _apply(rt, doc, op, key, item)
        else:
            raise invalid_value(f"A path-less {op} needs an object value.")
    return canonical(rt, doc)


def _checked(attribute: Attribute, value: object, path: str) -> object:
    """The value in canonical form (documents.coerce: None unassigns; a multi-valued attribute's, a list; a
    complex one's, an object); 422 invalidValue if it does not match the attribute's schema."""
    violations: list[JSONObject] = []
    coerced = coerce(attribute, value, path, violations)
    if violations:
        raise invalid_value(f"The value of {path} does not match its schema.", violations)
    return coerced


def _checked_elements(attribute: Attribute, value: object, path: str) -> list[JSONObject]:
    """A multi-valued complex attribute's value, checked: its elements."""
    checked = _checked(attribute, value, path)
    return objects_in(checked if isinstance(checked, list) else [])


def _value_of(element: object) -> object:
    """What a removal's listed value names: an element's `value`, or a bare value itself."""
    found = as_object(element)
    return element if found is None else found.get("value")


def _apply(rt: ResourceType, doc: JSONObject, op: str, path_text: str, value: object) -> None:
    extension = rt.schema_for(path_text) if ":" in path_text else None
    if extension is not None and extension is not rt.core:  # the whole extension
        if op == "remove":
            doc.pop(extension.id, None)
            return
        if op == "replace":
            doc.pop(extension.id, None)
        attributes = as_object(value)
        if attributes is None:
            raise invalid_value(f"{extension.id} takes an object.")
        for name, item in attributes.items():
            if name.lower() != "schemas":
                _apply(rt, doc, "add" if op == "replace" else op, f"{extension.id}:{name}", item)
        return
    node = parse_path(path_text)
    attr_path = node.attr_path if isinstance(node, ValuePath) else node
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
    host = doc if schema is rt.core or schema is None else object_at(doc, schema.id)
    key = attribute.name
    leaf = attribute.sub(sub_name) if sub_name else None
    if sub_name and leaf is None:
        raise bad_request("invalidPath", f"{attribute.name} has no sub-attribute {sub_name!r}.")

    if value_filter is not None:
        if not attribute.multi_valued:
            raise bad_request("invalidPath", f"{attribute.name} is not multi-valued: it takes no filter.")
        _through_filter(attribute, host, op, value_filter, leaf, value, path_text)
    elif leaf is not None:
        targets = objects(host, key) if attribute.multi_valued else [object_at(host, key)]
        for element in targets:
            if op == "remove":
                element.pop(leaf.name, None)
            else:
                element[leaf.name] = _checked(leaf, value, path_text)
    elif op == "remove":
        if attribute.multi_valued and value is not None:
            # Entra: remove exactly the listed values (`members` with [{"value": id}]).
            gone = [_value_of(v) for v in (value if isinstance(value, list) else [value])]
            host[key] = [e for e in items(host, key) if as_object(e) is None or _value_of(e) not in gone]
        else:
            host.pop(key, None)
    else:
        new = _checked(attribute, value, path_text)
        current = as_object(host.get(key))
        if attribute.multi_valued:
            _put_items(host, key, new if isinstance(new, list) else [], replace=op == "replace")
        elif attribute.type == "complex" and current is not None and (given := as_object(new)) is not None:
            current.update(given)
        else:
            host[key] = new
    for name in [k for k, v in host.items() if v in (None, [], {})]:
        del host[name]


def _put_items(host: JSONObject, key: str, added: list[object], *, replace: bool) -> None:
    current = [] if replace else items(host, key)
    if any(element.get("primary") is True for element in objects_in(added)):
        for element in objects_in(current):
            element.pop("primary", None)
    for item in added:
        if item not in current:
            current.append(item)
    host[key] = current


def _described(node: FilterNode) -> JSONObject | None:
    """The element an `eq` filter (or an `and` of them) describes, to create it."""
    terms = node.terms if isinstance(node, LogicalExpr) and node.op == LogicalOperator.and_ else (node,)
    element: JSONObject = {}
    for term in terms:
        if not (isinstance(term, Comparison) and term.op == CompareOperator.eq and not term.attr_path.sub_attr):
            return None
        element[term.attr_path.attr] = term.value
    return element


def _through_filter(attribute: Attribute, host: JSONObject, op: str, value_filter: FilterNode,
                    leaf: Attribute | None, value: object, path_text: str) -> None:
    elements = items(host, attribute.name)
    matched = [e for e in objects_in(elements) if element_matches(attribute, e, value_filter)]
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
        if leaf is not None:
            given: JSONObject = {leaf.name: value}
        elif (found := as_object(value)) is not None or not value:
            given = found or {}
        else:  # a bare value or a list: checked as a match's replacement is (a 422, or its first element)
            replacement = _checked_elements(attribute, value, path_text)
            given = replacement[0] if replacement else {}
        created = _checked_elements(attribute, {**described, **given}, path_text)
        if not created:  # the filter describes nothing this attribute keeps (`emails[value eq null]`)
            raise bad_request("noTarget", f"{path_text!r} matches no value.")
        _put_items(host, attribute.name, [created[0]], replace=False)
        return
    for element in matched:
        if leaf is not None:
            element[leaf.name] = _checked(leaf, value, path_text)
        else:
            replacement = _checked_elements(attribute, value, path_text)
            element.update(replacement[0] if replacement else {})
    host[attribute.name] = elements
