"""Moderation for the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file holds
its moderation: a small, documented blocklist, each entry a (category, regex),
and the check that scores a text against it.
"""

from __future__ import annotations

import re

from persona_service.kernel.models import ModerationResult
from persona_service.providers.local.triggers import UNSAFE_MARKER

MODERATION_CATEGORIES = ("violence", "self_harm", "pii", "hate", "child_safety")
BLOCKLIST: tuple[tuple[str, str], ...] = (
    ("violence", r"\b(build|make|building|making|built|made) an? bomb\b"),
    ("violence", r"\bkill(s|ed|ing)?\b"),
    ("violence", r"\bterrorists?\b"),
    ("violence", re.escape(UNSAFE_MARKER)),
    ("self_harm", r"\bself[- ]harm\b"),
    ("self_harm", r"\bsuicide\b"),
    ("pii", r"\bcredit card numbers?\b"),
    ("pii", r"\bsocial security numbers?\b"),
    ("hate", r"\bhate speech\b"),
    ("hate", r"\bethnic cleansing\b"),
    ("hate", r"\bsubhuman\b"),
    ("child_safety", r"\bchild abuse\b"),
)
_BLOCKLIST = tuple((category, re.compile(pattern, re.IGNORECASE)) for category, pattern in BLOCKLIST)


def moderate(text: str) -> ModerationResult:
    """Flag each category with a blocklist hit; its score grows with the hits."""
    hits: dict[str, int] = {}
    matches = []
    for category, pattern in _BLOCKLIST:
        found = pattern.search(text)
        if found:
            hits[category] = hits.get(category, 0) + 1
            matches.append((category, found.group(0)))
    scores = {c: (min(1.0, 0.6 + 0.2 * hits[c]) if c in hits else 0.0) for c in MODERATION_CATEGORIES}
    categories = tuple(c for c in MODERATION_CATEGORIES if c in hits)
    return ModerationResult(bool(categories), categories, scores, tuple(matches))
