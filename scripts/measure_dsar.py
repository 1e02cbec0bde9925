"""Peak memory of a DSAR export (#32): seed one user with about `--rows`
rows (chat messages, 50 to a session, through scripts/seed_volume.py's COPY
paths) into an embedded PostgreSQL of its own, then build that user's export
in a fresh Python process (PrivacyService.build into local storage, exactly
as the job does) and report that process's resident memory before the build
and at its peak (the kernel's VmHWM), the time and the object's size.

    python scripts/measure_dsar.py --rows 1000000       # the issue's target: growth <= 200 MB
    python scripts/measure_dsar.py --rows 100000 --data-dir /tmp/dsar

Results: stdout (one JSON line) and .build/measure-dsar.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PER_SESSION = 50


def seed(rows: int, data_dir: pathlib.Path, seed_file: pathlib.Path) -> None:
    """The user's rows as the volume seed makes them (every session theirs); every other table minimal."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import seed_volume

    minimal = {name: "1" for name in ("orgs", "scim-users", "scim-groups", "events", "deliveries", "portraits",
                                      "audit", "listings", "reviews", "chains")}
    argv = ["--data-dir", str(data_dir), "--out", str(seed_file), "--messages", str(rows),
            "--sessions", str(max(1, rows // PER_SESSION)), "--heavy-share", "1.0", "--personas", "100",
            "--chain-depth", "5", *(x for name, value in minimal.items() for x in (f"--{name}", value))]
    seed_volume.main(argv)


def _kib(field: str) -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def build(seeded: dict) -> dict:
    """In this (fresh) process: the export of the seeded user, and this process's memory."""
    from persona_service.files.local import LocalStorage
    from persona_service.kernel.db.engine import make_engine
    from persona_service.privacy.repository import PrivacyRepository
    from persona_service.privacy.service import PrivacyService
    from persona_service.registry import MODULES

    engine = make_engine(seeded["database_url"], pool_size=1)
    with engine.begin() as conn:  # the user's request
        PrivacyRepository(conn).request("dsr_measure", seeded["org_id"], seeded["heavy_user_id"])
    with tempfile.TemporaryDirectory() as root:
        storage = LocalStorage(root, b"measure", "http://127.0.0.1")
        baseline = _kib("VmRSS")
        started = time.perf_counter()
        with engine.begin() as conn:
            job = PrivacyService(conn).build(storage, MODULES.personal_data, 3600)
        seconds = time.perf_counter() - started
        assert job is not None
        with engine.connect() as conn:
            (done,) = PrivacyRepository(conn).page(seeded["org_id"], seeded["heavy_user_id"], 1, None)
        if done.status != "completed":
            raise RuntimeError(f"export {done.status}: {done.error}")
        path = pathlib.Path(root) / done.storage_key
        size = path.stat().st_size
        with path.open("rb") as f:  # the manifest is the document's tail
            f.seek(max(0, size - 4096))
            tail = f.read().decode(errors="replace")
    engine.dispose()
    counts = json.loads("{" + tail[tail.index('"manifest"'):])["manifest"]["counts"]
    peak = _kib("VmHWM")
    return {"rows": sum(counts.values()), "counts": counts, "seconds": round(seconds, 1),
            "object_mb": round(size / 2**20, 1), "baseline_rss_mb": round(baseline / 1024, 1),
            "peak_rss_mb": round(peak / 1024, 1), "growth_mb": round((peak - baseline) / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="chat messages of the user (plus sessions)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=ROOT / ".build" / "dsar")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / ".build" / "measure-dsar.json")
    parser.add_argument("--build", type=pathlib.Path, help=argparse.SUPPRESS)  # the child: a seed file
    args = parser.parse_args(argv)
    if args.build:
        print(json.dumps(build(json.loads(args.build.read_text()))), flush=True)
        return 0
    seed_file = args.data_dir.with_name(args.data_dir.name + "-seed.json")
    seed(args.rows, args.data_dir, seed_file)  # this process keeps the embedded PostgreSQL up
    child = subprocess.run([sys.executable, __file__, "--build", str(seed_file)], capture_output=True, text=True)
    if child.returncode:
        sys.stderr.write(child.stderr)
        return child.returncode
    result = json.loads(child.stdout.strip().splitlines()[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
