"""Test triggers of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file holds
the markers a user message can carry to get a documented reply: a drifting
one, an unsafe one, or a tool call (see the package docstring).
"""

from __future__ import annotations

import re

DRIFT_TRIGGER = "[[drift]]"
UNSAFE_TRIGGER = "[[unsafe]]"
UNSAFE_MARKER = "[unsafe-sample]"
TOOL_TRIGGER = re.compile(r"\[\[tool:([A-Za-z0-9_.\-]+)\]\]")
_MARKERS = re.compile(r"\[\[[^\]]*\]\]")
