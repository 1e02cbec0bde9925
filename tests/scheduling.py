"""How long each scope of the suite is expected to take, for `make pytest`'s scheduler (tests/conftest.py): the
seconds measured per file of a run (scripts/suite_time.py --durations-out tests/durations.json)."""

from __future__ import annotations

import functools
import json
import pathlib

# Seconds per test file of a measured run (scripts/suite_time.py --durations-out tests/durations.json).
DURATIONS = pathlib.Path(__file__).with_name("durations.json")


@functools.cache
def measured_seconds() -> dict[str, float]:
    try:
        return {str(path): float(seconds) for path, seconds in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def expected_seconds(known: dict[str, float], scope: str, tests: int) -> float:
    """A scope's measured seconds (a shared folder's: its files'), or, for a file not measured yet, its tests at
    the measured run's median seconds a test (a second when nothing was measured)."""
    measured = [seconds for path, seconds in known.items() if path == scope or path.startswith(scope + "/")]
    return sum(measured) if measured else tests * known.get("*per test", 1.0)
