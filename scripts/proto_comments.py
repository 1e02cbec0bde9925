"""Proto comments as users read them (AIP-192).

A proto comment is what users read (OpenAPI descriptions, the `/docs` page,
the SDKs' docstrings, which are all generated from gen/openapi.json), except
text inside `(--` and `--)`: maintainers' notes (how it is implemented), which
are never emitted. `user_text` is the one place that split is made.
"""

from __future__ import annotations

import re

_INTERNAL = re.compile(r"\(--.*?--\)", re.DOTALL)
OPEN, CLOSE = "(--", "--)"


class CommentError(ValueError):
    """A `(--` without its `--)` (or the reverse): the note would reach users."""


def user_text(comment: str) -> str:
    """The comment without its `(-- ... --)` notes, each paragraph on one line
    (lines joined by a space) and paragraphs separated by two spaces, the way
    the SDK generators split them again."""
    # A note becomes a NUL, so that the lines it filled vanish rather than
    # count as the blank line of a paragraph break.
    text = _INTERNAL.sub("\0", comment)
    # "word (-- note --)." reads "word.", not "word .".
    text = re.sub(r"\s*\0(?=[.,;:!?)])", "", text)
    if OPEN in text or CLOSE in text:
        raise CommentError(f"unbalanced {OPEN} {CLOSE} in comment: {comment.strip()[:80]!r}")
    lines = [line for line in text.splitlines() if "\0" not in line or line.replace("\0", "").strip()]
    paragraphs = (" ".join(block.replace("\0", " ").split()) for block in re.split(r"\n\s*\n", "\n".join(lines)))
    return "  ".join(p for p in paragraphs if p)
