"""How long the suite takes, and where the time goes: runs pytest (arguments after `--` reach it)
with a JUnit report, then prints the wall time, the machine's load while it ran (a busy machine's
figure is not a quiet one's), and the seconds per folder and the slowest files, as Markdown.

    .venv/bin/python scripts/suite_time.py                 # the whole suite, as `make pytest` runs it
    .venv/bin/python scripts/suite_time.py -- tests/kernel  # a part of it
    .venv/bin/python scripts/suite_time.py --from-junit report.xml --durations-out tests/durations.json

`--durations-out` writes the seconds per file that `make pytest`'s workers start the longest scopes by
(tests/conftest.py); `--from-junit` reads a report a run already wrote (`PYTEST_ARGS=--junitxml=…`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def file_seconds(report: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) from a JUnit report."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = next((i for i, p in enumerate(parts) if p.startswith("test")
                       and i > 0), len(parts) - 1)
        seconds["/".join(parts[: module + 1]) + ".py"] += float(case.get("time") or 0)
    return seconds


def write_durations(report: Path, out: Path | None) -> None:
    """Seconds per file of a JUnit report, rounded, and the median seconds a test (`*per test`: the guess for
    a file not measured yet)."""
    if out is None:
        return
    tests = sorted(float(case.get("time") or 0) for case in ET.parse(report).iter("testcase"))
    table: dict[str, float] = {path: round(spent, 1) for path, spent in sorted(file_seconds(report).items())}
    table["*per test"] = round(statistics.median(tests), 2) if tests else 1.0
    out.write_text(json.dumps(table, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest files to list")
    parser.add_argument("--durations-out", type=Path, help="write the seconds per file here (JSON)")
    parser.add_argument("--from-junit", type=Path, help="read this JUnit report instead of running pytest")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest gets (default: the whole suite)")
    args = parser.parse_args()
    if args.from_junit:
        write_durations(args.from_junit, args.durations_out)
        return 0
    with tempfile.TemporaryDirectory(prefix="suite-time-") as folder:
        report = Path(folder) / "junit.xml"
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *args.pytest_args],
                                cwd=ROOT, check=False)
        wall = time.monotonic() - started
        load_after = os.getloadavg()
        seconds = file_seconds(report) if report.exists() else {}
        if report.exists():
            write_durations(report, args.durations_out)
    folders: dict[str, float] = collections.defaultdict(float)
    for path, spent in seconds.items():
        folders[path.rsplit("/", 1)[0] if path.count("/") > 1 else path] += spent
    print(f"\n## Suite time: {wall / 60:.1f} min wall ({wall:.0f} s), pytest exit {result.returncode}, "
          f"{os.cpu_count()} cores, load average {load_before:.1f} at start, {load_after[2]:.1f} over the last "
          f"15 min at the end\n")
    print("| folder | seconds |\n|---|---:|")
    for folder, spent in sorted(folders.items(), key=lambda item: -item[1]):
        print(f"| {folder} | {spent:.0f} |")
    print("\n| slowest files | seconds |\n|---|---:|")
    for path, spent in sorted(seconds.items(), key=lambda item: -item[1])[: args.top]:
        print(f"| {path} | {spent:.0f} |")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
