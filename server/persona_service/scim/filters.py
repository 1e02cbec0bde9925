"""SCIM filters (RFC 7644 §3.4.2.2): parsed by scim2-models, and evaluated
in Python on the elements of a multi-valued attribute (PATCH value paths).
The repository translates them into SQL (scim.repository.SqlFilter)."""

from __future__ import annotations

from typing import TypeVar

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
    Present,
    ValuePath,
)

from persona_service.scim.errors import bad_request
from persona_service.scim.json_support import as_object
from persona_service.scim.schemas import Attribute

_MAX_FILTER = 4096


def parse_filter(text: str) -> FilterNode:
    if len(text) > _MAX_FILTER:
        raise bad_request("invalidFilter", f"The filter is longer than {_MAX_FILTER} characters.")
    try:
        return ScimFilter(text).ast
    except (SCIMException, ValueError) as exc:
        raise bad_request("invalidFilter", f"The filter is not valid: {exc}") from None


def parse_path(text: str) -> AttrPath | ValuePath:
    try:
        node = Path(text).ast
    except (SCIMException, ValueError) as exc:
        raise bad_request("invalidPath", f"The path {text!r} is not valid: {exc}") from None
    if node is None:
        raise bad_request("invalidPath", f"The path {text!r} names no attribute.")
    if not isinstance(node, AttrPath | ValuePath):  # `userName eq "x"`, `emails pr`: filters, which parse too
        raise bad_request("invalidPath", f"The path {text!r} is a filter, not an attribute path.")
    return node


# --- in Python, on one element of a multi-valued attribute (PATCH) ----------------


# What a filter orders: two strings or two numbers (an int, a float, a boolean); nothing else compares.
_Ordered = TypeVar("_Ordered", str, float)


def _ordered(op: CompareOperator, actual: _Ordered, expected: _Ordered) -> bool:
    if op == CompareOperator.gt:
        return actual > expected
    if op == CompareOperator.ge:
        return actual >= expected
    if op == CompareOperator.lt:
        return actual < expected
    if op == CompareOperator.le:
        return actual <= expected
    raise ValueError(f"{op} orders nothing")


def element_matches(attribute: Attribute, element: object, node: FilterNode) -> bool:
    if isinstance(node, LogicalExpr):
        results = (element_matches(attribute, element, t) for t in node.terms)
        return all(results) if node.op == LogicalOperator.and_ else any(results)
    if isinstance(node, Not):
        return not element_matches(attribute, element, node.expr)
    found = as_object(element)
    if not isinstance(node, Comparison | Present) or found is None:
        return False
    leaf = attribute.sub(node.attr_path.attr)
    if leaf is None:
        raise bad_request("invalidFilter", f"{attribute.name} has no sub-attribute {node.attr_path.attr!r}.")
    actual = next((v for k, v in found.items() if k.lower() == leaf.name.lower()), None)
    if isinstance(node, Present):
        return actual not in (None, "", [])
    expected: object = node.value
    if isinstance(actual, str) and isinstance(expected, str) and not leaf.case_exact:
        actual, expected = actual.lower(), expected.lower()
    op = node.op
    if op == CompareOperator.eq:
        return actual == expected
    if op == CompareOperator.ne:
        return actual != expected
    if actual is None or expected is None:
        return False
    if op == CompareOperator.co:
        return str(expected) in str(actual)
    if op == CompareOperator.sw:
        return str(actual).startswith(str(expected))
    if op == CompareOperator.ew:
        return str(actual).endswith(str(expected))
    if isinstance(actual, str) and isinstance(expected, str):
        return _ordered(op, actual, expected)
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        return _ordered(op, actual, expected)
    return False  # a string against a number, an object, a list: Python's comparison refuses them, and so does SCIM
