"""Line coverage of server/persona_service per package, from a combined coverage data file (`make coverage`).

    python scripts/coverage_packages.py [--data-file .build/coverage/data] [--markdown] [--worst N]

A package is the first folder under persona_service/ (kernel/ is split one level further: kernel/transport,
kernel/data, ...); modules directly in persona_service/ are "(top level)". Files no test imported count with
every line missed (coverage's `source_pkgs` finds them)."""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent


def package_of(path: str) -> str:
    parts = pathlib.PurePath(path).parts
    inner = parts[parts.index("persona_service") + 1:] if "persona_service" in parts else parts
    if len(inner) == 1:
        return "(top level)"
    if inner[0] == "kernel" and len(inner) > 2:
        return f"kernel/{inner[1]}"
    return inner[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-file", default=str(ROOT / ".build" / "coverage" / "data"))
    parser.add_argument("--markdown", action="store_true", help="a Markdown table (docs/testing.md)")
    parser.add_argument("--worst", type=int, default=10, help="also list the N files with the most missed lines")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "coverage.json"
        subprocess.run([sys.executable, "-m", "coverage", "json", "--quiet", f"--data-file={args.data_file}",
                        "-o", str(out)], check=True, cwd=ROOT)
        files = json.loads(out.read_text())["files"]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, entry in files.items():
        summary = entry["summary"]
        totals[package_of(path)][0] += summary["num_statements"]
        totals[package_of(path)][1] += summary["covered_lines"]
    rows = sorted(totals.items())
    statements = sum(t[0] for _, t in rows)
    covered = sum(t[1] for _, t in rows)
    rows.append(("TOTAL", [statements, covered]))
    pct = lambda s, c: 100.0 * c / s if s else 100.0  # noqa: E731
    if args.markdown:
        print("| package | lines | missed | covered |\n|---|---:|---:|---:|")
        for name, (s, c) in rows:
            print(f"| {name} | {s:,} | {s - c:,} | {pct(s, c):.1f}% |")
    else:
        print(f"{'package':<24} {'lines':>7} {'missed':>7} {'covered':>8}")
        for name, (s, c) in rows:
            print(f"{name:<24} {s:>7} {s - c:>7} {pct(s, c):>7.1f}%")
    if args.worst:
        worst = sorted(files.items(), key=lambda kv: kv[1]["summary"]["missing_lines"], reverse=True)[:args.worst]
        print(f"\nmost missed lines ({args.worst}):")
        for path, entry in worst:
            s = entry["summary"]
            print(f"  {pathlib.PurePath(path).as_posix()}: {s['missing_lines']} of {s['num_statements']} missed "
                  f"({s['percent_covered']:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
