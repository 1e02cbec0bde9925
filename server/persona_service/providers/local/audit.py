"""The audit step of the deterministic local provider's persona pipeline.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
answers the ``audit`` task: a score in 0..1 and notes from completeness
checks of the soul/voice JSON in the last user message.
"""

from __future__ import annotations

from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.models import Message
from persona_service.providers.local.text import _dumps, _json_objects, _last_user, _list


def audit_task(messages: list[Message]) -> str:
    merged: JSONObject = {}
    for obj in _json_objects(_last_user(messages)):
        for key in ("soul", "voice"):
            inner = obj.get(key)
            if isinstance(inner, dict):
                merged.update(inner)
        merged.update({k: v for k, v in obj.items() if k not in ("soul", "voice")})
    name = str(merged.get("name") or "")
    traits = _list(merged.get("traits"))
    values = _list(merged.get("values"))
    checks = [
        ("name is present", bool(name.strip())),
        ("desire has at least 20 characters", len(str(merged.get("desire") or "")) >= 20),
        ("backstory is present", bool(str(merged.get("backstory") or "").strip())),
        ("3-5 traits", 3 <= len(traits) <= 5),
        ("2-3 values", 2 <= len(values) <= 3),
        ("speaking style is present", bool(str(merged.get("speaking_style") or "").strip())),
    ]
    if any(k in merged for k in ("system_prompt", "greeting", "sample_dialogues", "style_notes")):
        prompt = str(merged.get("system_prompt") or "")
        dialogues = _list(merged.get("sample_dialogues"))
        checks += [
            ("system prompt names the persona", bool(prompt) and (not name or name in prompt)),
            ("greeting is present", bool(str(merged.get("greeting") or "").strip())),
            ("sample dialogues are present", len(dialogues) >= 1),
        ]
    passed = sum(ok for _, ok in checks)
    score = round(passed / len(checks), 3)
    failed = [label for label, ok in checks if not ok]
    notes = (f"All {len(checks)} completeness checks passed." if not failed
             else f"{passed}/{len(checks)} checks passed; failing: {'; '.join(failed)}.")
    return _dumps({"score": score, "notes": notes})
