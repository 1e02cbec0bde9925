"""Time, in one place, so it can be injected where tests need to move it."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime) -> str:
    """RFC 3339 in UTC with `Z`, as the API writes times in JSON data."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
