"""`make pytest`'s workers start the longest scopes first (tests/conftest.py): by the seconds measured per file
(tests/durations.json), a shared folder by its files' sum, a file not measured yet by its tests at the measured
median."""

from __future__ import annotations

import json

from scheduling import DURATIONS, expected_seconds


def test_scopes_are_expected_to_take_what_was_measured():
    known = {"tests/a/test_one.py": 30.0, "tests/shared/test_x.py": 20.0, "tests/shared/test_y.py": 25.0,
             "*per test": 0.5}
    assert expected_seconds(known, "tests/a/test_one.py", 3) == 30.0
    assert expected_seconds(known, "tests/shared", 9) == 45.0  # a folder that shares a stack: its files
    assert expected_seconds(known, "tests/new/test_new.py", 10) == 5.0  # not measured yet: 10 tests × 0.5 s
    order = sorted(["tests/a/test_one.py", "tests/shared", "tests/new/test_new.py"],
                   key=lambda scope: -expected_seconds(known, scope, 10))
    assert order == ["tests/shared", "tests/a/test_one.py", "tests/new/test_new.py"]


def test_the_measured_durations_are_committed_and_name_files_that_exist():
    measured = json.loads(DURATIONS.read_text())
    root = DURATIONS.parent.parent
    files = [path for path in measured if not path.startswith("*")]
    assert measured["*per test"] > 0 and len(files) > 100
    missing = [path for path in files if not (root / path).exists()]
    assert len(missing) <= len(files) // 10, f"refresh tests/durations.json (scripts/suite_time.py): {missing}"
