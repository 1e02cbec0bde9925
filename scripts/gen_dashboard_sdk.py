"""The dashboard's copy of the TypeScript SDK's build.

The dashboard (server/persona_service/dashboard/static/) calls the API through
the SDK (one client, one SSE parser, one retry and idempotency policy): this
compiles sdk/typescript/src with the repository's TypeScript (the package's own
tsconfig, no declarations, no comments: a change to the docs alone changes nothing
here) and writes the JavaScript to static/sdk/, where the
server serves it with the dashboard's other modules. `--check` writes nothing and
exits 1 when static/sdk/ differs from a fresh build (make gen-check), so the copy
never drifts from the SDK's sources. Needs node_modules (`npm ci`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SDK = ROOT / "sdk" / "typescript"
TSC = ROOT / "node_modules" / ".bin" / "tsc"
OUT = ROOT / "server" / "persona_service" / "dashboard" / "static" / "sdk"
HEADER = "// Built by scripts/gen_dashboard_sdk.py from sdk/typescript/src. DO NOT EDIT.\n"


def build() -> dict[str, str]:
    """The SDK's modules as tsc emits them for the package, by file name."""
    if not TSC.exists():
        raise SystemExit("gen_dashboard_sdk: TypeScript is not installed: run `npm ci` at the repository root")
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run([str(TSC), "-p", str(SDK), "--outDir", tmp, "--declaration", "false", "--removeComments"],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"gen_dashboard_sdk: tsc failed\n{result.stdout}{result.stderr}")
        return {p.name: HEADER + p.read_text(encoding="utf-8") for p in sorted(Path(tmp).glob("*.js"))}


def main() -> int:
    parser = argparse.ArgumentParser(description="Copy the TypeScript SDK's build into the dashboard's static files.")
    parser.add_argument("--check", action="store_true", help="exit 1 if static/sdk/ differs from a fresh build")
    args = parser.parse_args()
    wanted = build()
    current = {p.name: p.read_text(encoding="utf-8") for p in OUT.glob("*.js")} if OUT.exists() else {}
    if current == wanted:
        return 0
    if args.check:
        print(f"{OUT} is out of date with sdk/typescript/src: run python scripts/gen_dashboard_sdk.py", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    for name in current.keys() - wanted.keys():
        (OUT / name).unlink()
    for name, text in wanted.items():
        if current.get(name) != text:
            (OUT / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
