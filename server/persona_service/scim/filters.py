"""SCIM filters (RFC 7644 §3.4.2.2): parsed by scim2-models, translated
here into SQL on a resource table (its columns for the attributes it keeps
as columns, its JSONB `document` for the rest), and evaluated in Python on
the elements of a multi-valued attribute (PATCH value paths)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from scim2_models import Path, ScimFilter
from scim2_models.exceptions import SCIMException
from scim2_models.path import (
    AttrPath,
    CompareOperator,
    Comparison,
    FilterNode,
    LogicalExpr,
    LogicalOperator,
    Not,
    PathNode,
    Present,
    ValuePath,
)
from sqlalchemy import (
    Boolean,
    ColumnElement,
    Numeric,
    String,
    and_,
    cast,
    column,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from persona_service.scim.errors import bad_request
from persona_service.scim.schemas import Attribute, ResourceType

_MAX_FILTER = 4096


def parse_filter(text: str) -> FilterNode:
    if len(text) > _MAX_FILTER:
        raise bad_request("invalidFilter", f"The filter is longer than {_MAX_FILTER} characters.")
    try:
        return ScimFilter(text).ast
    except (SCIMException, ValueError) as exc:
        raise bad_request("invalidFilter", f"The filter is not valid: {exc}") from None


def parse_path(text: str) -> PathNode:
    try:
        node = Path(text).ast
    except (SCIMException, ValueError) as exc:
        raise bad_request("invalidPath", f"The path {text!r} is not valid: {exc}") from None
    if node is None:
        raise bad_request("invalidPath", f"The path {text!r} names no attribute.")
    return node


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class _SqlBoolean:
    """`and`, `or` and `not` as SQL; the terms are the subclass's."""

    def where(self, node: FilterNode) -> ColumnElement[bool]:
        if isinstance(node, LogicalExpr):
            terms = [self.where(t) for t in node.terms]
            return and_(*terms) if node.op == LogicalOperator.and_ else or_(*terms)
        if isinstance(node, Not):
            return not_(self.where(node.expr))
        return self._term(node)

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        raise NotImplementedError


class SqlFilter(_SqlBoolean):
    """A filter as a WHERE clause on one resource table. `columns` maps
    lower-case attribute paths (`username`, `meta.created`) to columns."""

    def __init__(self, rt: ResourceType, document, columns: Mapping[str, Any]):
        self.rt, self.document, self.columns = rt, document, columns

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        if isinstance(node, ValuePath):
            attribute = self._attribute(node.attr_path)
            element = self._elements(node.attr_path.uri, attribute)
            inner = _ElementFilter(attribute, element.c.value).where(node.val_filter)
            return exists(select(literal(1)).select_from(element).where(inner))
        if isinstance(node, Comparison | Present):
            path = node.attr_path
            attribute = self._attribute(path)
            column = self.columns.get(f"{attribute.name}.{path.sub_attr}".lower() if path.sub_attr
                                      else attribute.name.lower())
            if column is not None:
                return _compare(node, column, _leaf(attribute, path.sub_attr))
            if attribute.multi_valued:
                # `emails co "x"` compares the elements' `value` (RFC 7644 §3.4.2.2).
                sub = path.sub_attr or "value"
                element = self._elements(path.uri, attribute)
                leaf = _leaf(attribute, sub)
                inner = _compare(node, _as_text(element.c.value[leaf.name], leaf), leaf)
                return exists(select(literal(1)).select_from(element).where(inner))
            leaf = _leaf(attribute, path.sub_attr)
            keys = [k for k in (path.uri if path.uri and self.rt.schema_for(path.uri) is not self.rt.core else None,
                                attribute.name, path.sub_attr and leaf.name) if k]
            return _compare(node, _as_text(self.document[tuple(keys)], leaf), leaf)
        raise bad_request("invalidFilter", "The filter uses an unsupported expression.")

    def sort_key(self, node: FilterNode):
        """What `sortBy` names (parsed as `<attribute> pr`): a column, or the
        document's text (a plural attribute's first value)."""
        if not isinstance(node, Present):
            raise bad_request("invalidValue", "sortBy names one attribute.")
        path = node.attr_path
        attribute = self._attribute(path)
        column = self.columns.get(f"{attribute.name}.{path.sub_attr}".lower() if path.sub_attr
                                  else attribute.name.lower())
        if column is not None:
            return column
        holder = self._json(path.uri, attribute)
        if attribute.multi_valued:
            return holder[0][path.sub_attr or "value"].astext
        return holder[path.sub_attr].astext if path.sub_attr else holder.astext

    def _attribute(self, path: AttrPath) -> Attribute:
        attribute = self.rt.attribute(path.attr, path.uri)
        if attribute is None or attribute.returned == "never":
            raise bad_request("invalidFilter", f"The filter names an unknown attribute {str(path)!r}.")
        if path.sub_attr and attribute.sub(path.sub_attr) is None:
            raise bad_request("invalidFilter", f"The filter names an unknown attribute {str(path)!r}.")
        return attribute

    def _json(self, uri: str | None, attribute: Attribute):
        holder = self.document
        schema = self.rt.schema_for(uri) if uri else None
        if schema is not None and schema is not self.rt.core:
            holder = holder[schema.id]
        return holder[attribute.name]

    def _elements(self, uri: str | None, attribute: Attribute):
        return func.jsonb_array_elements(func.coalesce(self._json(uri, attribute), cast(literal("[]"), JSONB))
                                         ).table_valued(column("value", JSONB))


def _leaf(attribute: Attribute, sub: str | None) -> Attribute:
    if sub is None:
        return attribute
    found = attribute.sub(sub)
    if found is None:
        raise bad_request("invalidFilter", f"{attribute.name} has no sub-attribute {sub!r}.")
    return found


def _as_text(json_value, leaf: Attribute):
    if leaf.type == "boolean":
        return cast(json_value.astext, Boolean)
    if leaf.type in ("integer", "decimal"):
        return cast(json_value.astext, Numeric)
    return json_value.astext


class _ElementFilter(_SqlBoolean):
    """A value filter on the elements of one multi-valued attribute."""

    def __init__(self, attribute: Attribute, element):
        self.attribute, self.element = attribute, element

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        if isinstance(node, Comparison | Present):
            leaf = _leaf(self.attribute, node.attr_path.attr)
            return _compare(node, _as_text(self.element[leaf.name], leaf), leaf)
        raise bad_request("invalidFilter", "Value filters cannot nest.")


_SQL_OPERATORS: dict[CompareOperator, Callable[[Any, Any], ColumnElement[bool]]] = {
    CompareOperator.eq: lambda c, v: c == v,
    CompareOperator.ne: lambda c, v: or_(c != v, c.is_(None)),
    CompareOperator.co: lambda c, v: c.like(f"%{_like(v)}%", escape="\\"),
    CompareOperator.sw: lambda c, v: c.like(f"{_like(v)}%", escape="\\"),
    CompareOperator.ew: lambda c, v: c.like(f"%{_like(v)}", escape="\\"),
    CompareOperator.gt: lambda c, v: c > v,
    CompareOperator.ge: lambda c, v: c >= v,
    CompareOperator.lt: lambda c, v: c < v,
    CompareOperator.le: lambda c, v: c <= v,
}


def _compare(node: Comparison | Present, column, leaf: Attribute) -> ColumnElement[bool]:
    if isinstance(node, Present):
        if leaf.type == "boolean":
            return column.is_not(None)
        return and_(column.is_not(None), func.coalesce(cast(column, String), "") != "")
    value, op = node.value, node.op
    if value is None:
        return column.is_(None) if op == CompareOperator.eq else column.is_not(None)
    if leaf.type == "boolean":
        if not isinstance(value, bool) or op not in (CompareOperator.eq, CompareOperator.ne):
            raise bad_request("invalidFilter", f"{leaf.name} is a boolean: compare it with eq or ne and true or false.")
        return column.is_(true() if value else false()) if op == CompareOperator.eq else column.is_not(
            true() if value else false())
    if leaf.type in ("integer", "decimal"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise bad_request("invalidFilter", f"{leaf.name} is a number.")
    elif leaf.type == "dateTime":
        value = _date_time(leaf, value)
    else:
        value = str(value)
        if not leaf.case_exact:
            column, value = func.lower(column), value.lower()
    if op in (CompareOperator.co, CompareOperator.sw, CompareOperator.ew) and not isinstance(value, str):
        raise bad_request("invalidFilter", f"{op.value} compares strings.")
    return _SQL_OPERATORS[op](column, value)


def _date_time(leaf: Attribute, value: Any) -> datetime:
    """A dateTime literal (RFC 7643 §2.3.5, xsd:dateTime; without an offset: UTC)."""
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise bad_request("invalidFilter", f"{leaf.name} is a dateTime: compare it with a string such as "
                          f"\"2024-05-01T12:00:00Z\", not {value!r}.")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --- in Python, on one element of a multi-valued attribute (PATCH) ----------------


def element_matches(attribute: Attribute, element: Any, node: FilterNode) -> bool:
    if isinstance(node, LogicalExpr):
        results = (element_matches(attribute, element, t) for t in node.terms)
        return all(results) if node.op == LogicalOperator.and_ else any(results)
    if isinstance(node, Not):
        return not element_matches(attribute, element, node.expr)
    if not isinstance(node, Comparison | Present) or not isinstance(element, dict):
        return False
    leaf = attribute.sub(node.attr_path.attr)
    if leaf is None:
        raise bad_request("invalidFilter", f"{attribute.name} has no sub-attribute {node.attr_path.attr!r}.")
    actual = next((v for k, v in element.items() if k.lower() == leaf.name.lower()), None)
    if isinstance(node, Present):
        return actual not in (None, "", [])
    expected = node.value
    if isinstance(actual, str) and isinstance(expected, str) and not leaf.case_exact:
        actual, expected = actual.lower(), expected.lower()
    op = node.op
    if op == CompareOperator.eq:
        return bool(actual == expected)
    if op == CompareOperator.ne:
        return bool(actual != expected)
    if actual is None or expected is None:
        return False
    try:
        return {
            CompareOperator.co: lambda: str(expected) in str(actual),
            CompareOperator.sw: lambda: str(actual).startswith(str(expected)),
            CompareOperator.ew: lambda: str(actual).endswith(str(expected)),
            CompareOperator.gt: lambda: actual > expected,
            CompareOperator.ge: lambda: actual >= expected,
            CompareOperator.lt: lambda: actual < expected,
            CompareOperator.le: lambda: actual <= expected,
        }[op]()
    except TypeError:
        return False
