"""Text helpers of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file holds
the small string and JSON helpers its generation steps share: word and
stopword lists, snippets, articles, embedded JSON objects, the last user
message.
"""

from __future__ import annotations

import json
import re

from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.models import Message
from persona_service.providers.local.triggers import _MARKERS

_WORD = re.compile(r"[^\W_][\w'\-]*")
_STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being am i me my we our
    you your he she it its they them their this that these those there here what which who whom whose how why when
    where do does did doing have has had having not no so than too very can could would should will shall may might
    must just about into over under again then once all any both each few more most other some such only own same
    s t don now up down out off let lets i'm i'd i'll you're it's that's""".split()
)


def _a(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def _sentence_safe(text: str) -> str:
    """One clause: no sentence terminators inside, no trailing punctuation."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"[.!?]+\s+", "; ", text)
    return text.rstrip(" .!?;:")


def _lcfirst(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


def _content_words(text: str) -> list[str]:
    words = _WORD.findall(text)
    return [w for w in words if w.lower() not in _STOPWORDS and len(w) > 1]


def _snippet(text: str, words: int = 8) -> str:
    parts = re.sub(r"[\"“”]", "", _MARKERS.sub(" ", text)).split()
    cut = " ".join(parts[:words])
    cut = re.sub(r"[.!?]+", "", cut).strip(" ,;:")
    return cut + ("…" if len(parts) > words else "")


def _json_objects(text: str) -> list[JSONObject]:
    """Every top-level JSON object embedded in `text`, in order."""
    decoder = json.JSONDecoder()
    found: list[JSONObject] = []
    i = 0
    while True:
        start = text.find("{", i)
        if start < 0:
            return found
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        if isinstance(value, dict):
            found.append(value)
        i = end


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _last_user(messages: list[Message]) -> str:
    for m in reversed(messages):
        if m.role == "user":
            return m.content
    return messages[-1].content if messages else ""


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
