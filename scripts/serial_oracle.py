"""The serial oracle's long form (tests/oracle.py): every pair of each aggregate's writes, `--rounds` times
each, on the suite's own stacks; then a report of the pairs covered, the rounds and every divergence with both
serial runs and what to replay.

    .venv/bin/python scripts/serial_oracle.py --rounds 20 [--report oracle.jsonl] [-k chat]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Every table module (as tests/test_serial_oracle_coverage.py reads them): a table added later runs here too.
TESTS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("**/test_*serial_oracle*_http.py"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="concurrent runs of each pair (default 10)")
    parser.add_argument("--report", default="", help="the JSON-lines report (default: a temporary file)")
    parser.add_argument("-k", default="", help="pytest's -k, to try some pairs only")
    args = parser.parse_args()
    report = pathlib.Path(args.report or tempfile.mkstemp(prefix="oracle-", suffix=".jsonl")[1])
    report.write_text("")
    env = {**os.environ, "ORACLE_ROUNDS": str(args.rounds), "ORACLE_REPORT": str(report)}
    command = [sys.executable, "-m", "pytest", *TESTS, "-q", "-p", "no:cacheprovider", *(["-k", args.k] if args.k else [])]
    subprocess.run(command, cwd=ROOT, env=env, check=False)
    pairs = [json.loads(line) for line in report.read_text().splitlines() if line]
    diverged = [p for p in pairs if p["divergences"]]
    print(f"\n{len(pairs)} pairs, {sum(p['rounds'] for p in pairs)} concurrent runs, {len(diverged)} pairs diverged "
          f"(report: {report})")
    for pair in diverged:
        print(f"- {pair['table']}: {' + '.join(pair['pair'])}: {len(pair['divergences'])} of {pair['rounds']} rounds")
        print(f"  {pair['divergences'][0][:600]}")
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
