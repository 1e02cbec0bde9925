"""docs/concurrency.md's counts of what the suite's race checks run (the oracle's pairs and rounds, the race hunt's
operations) are generated from the code by scripts/oracle_counts.py: a table, a pair or an operation added later
makes them stale, and this fails until `scripts/oracle_counts.py --write` is run."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT


def test_the_docs_counts_are_the_codes():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "oracle_counts.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
