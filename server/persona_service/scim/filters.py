"""SCIM filters (RFC 7644 §3.4.2.2): parsed by scim2-models, and evaluated
in Python on the elements of a multi-valued attribute (PATCH value paths).
The repository translates them into SQL (scim.repository.SqlFilter)."""

from __future__ import annotations

from typing import Any

from scim2_models import Path, ScimFilter
from scim2_models.exceptions import SCIMException
from scim2_models.path import (
    CompareOperator,
    Comparison,
    FilterNode,
    LogicalExpr,
    LogicalOperator,
    Not,
    PathNode,
    Present,
)

from persona_service.scim.errors import bad_request
from persona_service.scim.schemas import Attribute

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
        return bool({
            CompareOperator.co: lambda: str(expected) in str(actual),
            CompareOperator.sw: lambda: str(actual).startswith(str(expected)),
            CompareOperator.ew: lambda: str(actual).endswith(str(expected)),
            CompareOperator.gt: lambda: actual > expected,
            CompareOperator.ge: lambda: actual >= expected,
            CompareOperator.lt: lambda: actual < expected,
            CompareOperator.le: lambda: actual <= expected,
        }[op]())
    except TypeError:
        return False
