"""Token counting for the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
counts tokens (``ceil(words * 1.3)``, words whitespace-separated), prices a
message, and cuts a text to ``max_tokens``.
"""

from __future__ import annotations

import math
import re

from persona_service.kernel.models import Message


def count_tokens(text: str) -> int:
    """ceil(whitespace-separated words * 1.3)."""
    return math.ceil(len(text.split()) * 1.3)


def message_tokens(message: Message) -> int:
    calls = sum(count_tokens(c.name) + count_tokens(c.arguments) for c in message.tool_calls)
    return count_tokens(message.content) + calls + 4


def _truncate(text: str, max_tokens: int | None) -> tuple[str, bool]:
    if max_tokens is None or count_tokens(text) <= max_tokens:
        return text, False
    chunks = re.findall(r"\S+\s*", text)
    keep = 0
    while keep < len(chunks) and math.ceil((keep + 1) * 1.3) <= max_tokens:
        keep += 1
    return "".join(chunks[:keep]).rstrip(), True
