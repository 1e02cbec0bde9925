"""Peak memory of a DSAR export (#32): seed one user with about `--rows`
rows (chat messages, 50 to a session, through scripts/seed_volume.py's COPY
paths) into an embedded PostgreSQL of its own, then build that user's export
in a fresh Python process (PrivacyService.build into local storage, exactly
as the job does) and report that process's resident memory before the build
and at its peak (the kernel's VmHWM), the time and the object's size.

    python scripts/measure_dsar.py --rows 1000000       # the issue's target: growth <= 200 MB
    python scripts/measure_dsar.py --rows 100000 --data-dir /tmp/dsar

`--download-mb 200` measures the download instead: a stack of its own
(servers, Envoy, embedded PostgreSQL and Redis), an export-shaped object of
that size in its local storage, fetched once through Envoy on its signed URL
(GET /v1/files/...), read as it arrives and checked byte for byte; reports
the gRPC server process's RSS before (after a small download's warm-up) and
at the peak (sampled every 20 ms) and the throughput.

Results: stdout (one JSON line) and .build/measure-dsar.json (.build/measure-download.json).
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
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.data.work import Work
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
            job = PrivacyService(Work.on(conn)).build(storage, MODULES.personal_data, 3600)
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


def download(megabytes: int, data_dir: pathlib.Path) -> dict:
    """The server's memory while one client downloads a `megabytes` object through the edge."""
    import hashlib
    import shutil
    import threading

    import httpx
    import psutil
    from persona_service.files.local import LocalStorage
    from persona_service.files.storage import object_key, signing_key
    from persona_service.kernel.settings import Settings
    from persona_service.process.stack import Stack, free_port
    from persona_service.registry import MODULES

    shutil.rmtree(data_dir, ignore_errors=True)
    settings = Settings(data_dir=data_dir, http_port=free_port(), grpc_port=free_port(1000))
    stack = Stack(settings, MODULES, grpc_ports=[settings.grpc_port]).start()
    try:  # the servers' own key (kept in the data dir) and storage root
        storage = LocalStorage(data_dir / "objects", signing_key(settings.resolved_jwt_secret()), stack.http_url)
        key = object_key("org_measure", "privacy", "export.json")
        row = b'{"role":"user","content":"' + b"x" * 480 + b'"},\n'  # a chat message as the export writes it
        digest, path = hashlib.sha256(), data_dir / "export.json"
        with path.open("wb") as out:
            for _ in range(megabytes * 2**20 // len(row)):
                out.write(row)
                digest.update(row)
        with path.open("rb") as file:
            storage.put_file(key, file, "application/json")
        size = path.stat().st_size
        path.unlink()
        warm = object_key("org_measure", "privacy", "warm-up.json")  # the first call's one-off costs (imports, pools)
        storage.put(warm, row, "application/json")
        httpx.get(storage.signed_url(warm, 600).url).raise_for_status()
        # The gRPC server processes (`persona_service.cli serve`) answer downloads; workers run their jobs meanwhile.
        servers = [p for p in psutil.Process().children(recursive=True) if p.cmdline()[-2:] == ["persona_service.cli", "serve"]]
        baseline = sum(p.memory_info().rss for p in servers)
        peak, done = baseline, threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.02):
                peak = max(peak, sum(p.memory_info().rss for p in servers))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        received, got = 0, hashlib.sha256()
        started = time.perf_counter()
        with httpx.stream("GET", storage.signed_url(key, 600).url, timeout=120) as answer:
            answer.raise_for_status()
            for chunk in answer.iter_raw():
                received += len(chunk)
                got.update(chunk)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        return {"object_mb": round(size / 2**20, 1), "identical": received == size and got.digest() == digest.digest(),
                "seconds": round(seconds, 2), "mb_per_s": round(size / 2**20 / seconds, 1),
                "server_processes": len(servers), "server_rss_before_mb": round(baseline / 2**20, 1),
                "server_rss_peak_mb": round(peak / 2**20, 1), "server_rss_growth_mb": round((peak - baseline) / 2**20, 1)}
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="chat messages of the user (plus sessions)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=ROOT / ".build" / "dsar")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / ".build" / "measure-dsar.json")
    parser.add_argument("--build", type=pathlib.Path, help=argparse.SUPPRESS)  # the child: a seed file
    parser.add_argument("--download-mb", type=int, help="measure a download of an object this big instead")
    args = parser.parse_args(argv)
    if args.download_mb:
        result = download(args.download_mb, args.data_dir.with_name(args.data_dir.name + "-download"))
        out = args.out.with_name("measure-download.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        print(json.dumps(result))
        return 0
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
