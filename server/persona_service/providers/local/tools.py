"""Tool calls of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
decides whether a ``reply``/``recover`` answers with a tool call (forced by
``tool_choice``, a ``[[tool:NAME]]`` trigger or a mention of the function's
name) and builds its arguments from the tool's JSON schema.
"""

from __future__ import annotations

import re

from persona_service.kernel.models import GenerationOptions, Message, ToolCall
from persona_service.providers.local.seed import _short_hash
from persona_service.providers.local.text import _content_words, _dumps, _last_user, _snippet
from persona_service.providers.local.triggers import TOOL_TRIGGER


def tool_call(messages: list[Message], options: GenerationOptions) -> ToolCall | None:
    if not options.tools or options.tool_choice == "none" or not messages or messages[-1].role == "tool":
        return None
    offered = [t.get("function", t) for t in options.tools if isinstance(t, dict)]
    functions = [f for f in offered if isinstance(f, dict) and f.get("name")]
    if not functions:
        return None
    user = _last_user(messages)
    chosen = None
    forced = options.tool_choice
    if isinstance(forced, dict):
        forced_name = (forced.get("function") or {}).get("name") or forced.get("name")
        chosen = next((f for f in functions if f["name"] == forced_name), None)
    if chosen is None:
        for name in TOOL_TRIGGER.findall(user):
            chosen = next((f for f in functions if f["name"] == name), None)
            if chosen:
                break
    if chosen is None:
        lower = user.lower()
        for f in functions:
            pattern = r"\b" + re.escape(f["name"].lower()) + r"\b"
            spaced = r"\b" + re.escape(f["name"].lower().replace("_", " ")) + r"\b"
            if re.search(pattern, lower) or re.search(spaced, lower):
                chosen = f
                break
    if chosen is None and forced == "required":
        chosen = functions[0]
    if chosen is None:
        return None
    arguments = _dumps(_example_value(chosen.get("parameters") or {"type": "object"}, "", user))
    return ToolCall("call_" + _short_hash(chosen["name"], arguments, user), chosen["name"], arguments)


_STRING_HINTS = (
    (("city", "location", "place", "town", "destination"), "Lisbon"),
    (("country",), "Portugal"),
    (("email",), "user@example.com"),
    (("url", "link", "website"), "https://example.com"),
    (("date", "day"), "2024-01-01"),
    (("time",), "12:00"),
    (("unit", "units"), "celsius"),
    (("language", "lang", "locale"), "en"),
    (("currency",), "EUR"),
    (("name", "title"), "Ada"),
)


def _example_value(schema: object, prop: str, user: str) -> object:
    if not isinstance(schema, dict):
        return None
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    key = prop.lower()
    if kind == "object":
        props = schema.get("properties")
        return {name: _example_value(sub, name, user) for name, sub in (props if isinstance(props, dict) else {}).items()}
    if kind == "array":
        return [_example_value(schema.get("items") or {"type": "string"}, prop, user)]
    if kind == "integer":
        base = schema.get("minimum", 3 if any(k in key for k in ("count", "limit", "number", "max")) else 1)
        return int(base)
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    fmt = schema.get("format", "")
    if fmt == "date":
        return "2024-01-01"
    if fmt == "date-time":
        return "2024-01-01T12:00:00Z"
    if fmt == "email":
        return "user@example.com"
    if fmt in ("uri", "url"):
        return "https://example.com"
    if key.endswith("id"):
        return f"{prop}-{_short_hash(prop, user, length=6)}"
    for keys, value in _STRING_HINTS:
        if any(k == key or key.endswith("_" + k) or key.startswith(k) for k in keys):
            return value
    words = [w for w in _content_words(_snippet(user, 16)) if not w.startswith("[")]
    return " ".join(words[:6]) or f"example {prop or 'value'}"
