"""The boundary guard's cost per statement (kernel/data/boundaries.py), interleaved against another version of it.

    .venv/bin/python scripts/measure_boundary_guard.py --before <git rev> [--rounds 4] [--statements 500]

Each round runs, one process after another, the guard off, the guard as it is at `--before` (its boundaries.py,
read with `git show`) and the guard as it is in the working tree; each process times a repository's SELECT in a
unit of work (best of 5 x `--statements`, per statement) and a whole unit of work (begin, that SELECT, commit,
close), on an embedded PostgreSQL migrated as the test stacks' (tests/support.seed_postgres), and, in a process
of its own, a read of libpq's handle through the guard as psycopg reads it while it sends. It prints each round's
figures and `uptime` before and after: on a shared machine only interleaved figures compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLANT = '''
from sqlalchemy import text

STATEMENT = text("SELECT count(*) FROM chat_sessions WHERE false")


def select(conn, n):
    for _ in range(n):
        conn.execute(STATEMENT).scalar_one()
'''


def child(guard: str, url: str, statements: int, plants: pathlib.Path) -> dict[str, float]:
    """One process's figures (µs): `guard` is a boundaries.py to load in place of the package's, or 'off'."""
    sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]
    if guard != "off":
        spec = importlib.util.spec_from_file_location("persona_service.kernel.data.boundaries", guard)
        assert spec is not None and spec.loader is not None
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.data.uow import UnitOfWork

    spec = importlib.util.spec_from_file_location("persona_service.chat.bench_repository",
                                                  plants / "persona_service" / "chat" / "bench_repository.py")
    assert spec is not None and spec.loader is not None
    plant = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plant)
    engine = make_engine(url, pool_size=1)
    if guard != "off":
        sys.modules["persona_service.kernel.data.boundaries"].guarding(True)
    uow = UnitOfWork(engine)
    plant.select(uow.conn, 50)  # (warm: caches, the catalogue's first read)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        plant.select(uow.conn, statements)
        best = min(best, (time.perf_counter() - started) / statements)
    uow.close()
    whole = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(statements // 5):
            work = UnitOfWork(engine)
            plant.select(work.conn, 1)
            work.commit()
            work.close()
        whole = min(whole, (time.perf_counter() - started) / (statements // 5))
    engine.dispose()
    return {"statement_us": best * 1e6, "unit_of_work_us": whole * 1e6}


def handle_reads(guard: str) -> float:
    """ns per read of libpq's handle through the guard's property, as psycopg reads it while it sends (the older
    guard skipped the frame there, `_SENDING.depth`; the newer reads it: a domain's dumper runs inside the send)."""
    import timeit

    sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]
    spec = importlib.util.spec_from_file_location("persona_service.kernel.data.boundaries", guard)
    assert spec is not None and spec.loader is not None
    guard_module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard_module)

    class Holder:
        pass

    guard_module._beneath(Holder, "pgconn")
    holder = Holder()
    holder.pgconn = object()  # type: ignore[attr-defined]
    guard_module.guarding(True)
    if hasattr(guard_module._SENDING, "__dict__"):
        guard_module._SENDING.depth = 1  # (read only by the older guard)
    reads = 200_000
    return min(timeit.repeat(lambda: holder.pgconn, number=reads, repeat=5)) / reads * 1e9  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the git revision whose boundaries.py is the baseline")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--statements", type=int, default=500)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--reads-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reads_child:
        print(json.dumps(handle_reads(args.reads_child)))
        return
    if args.child:
        guard, url, statements, plants = args.child
        print(json.dumps(child(guard, url, int(statements), pathlib.Path(plants))))
        return
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]
    from persona_service.kernel.data.embedded import postgres_url
    from support import seed_postgres

    work = pathlib.Path(tempfile.mkdtemp(prefix="guard-cost-"))
    seed_postgres(work)
    url = postgres_url(work / "postgres")
    before = work / "boundaries_before.py"
    before.write_text(subprocess.run(["git", "show", f"{args.before}:server/persona_service/kernel/data/boundaries.py"],
                                     cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    plant = work / "plants" / "persona_service" / "chat" / "bench_repository.py"
    plant.parent.mkdir(parents=True)
    plant.write_text(PLANT)
    variants = {"off": "off", "before": str(before),
                "after": str(ROOT / "server" / "persona_service" / "kernel" / "data" / "boundaries.py")}
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for round_ in range(args.rounds):
        for name, guard in variants.items():
            done = subprocess.run([sys.executable, __file__, "--before", args.before, "--child", guard, url,
                                   str(args.statements), str(work / "plants")],
                                  check=True, capture_output=True, text=True, cwd=ROOT)
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            reads = ""
            if guard != "off":
                done = subprocess.run([sys.executable, __file__, "--before", args.before, "--reads-child", guard],
                                      check=True, capture_output=True, text=True, cwd=ROOT)
                reads = f"   handle read while sending {json.loads(done.stdout.strip().splitlines()[-1]):6.0f} ns"
            print(f"round {round_ + 1} {name:6} statement {figures['statement_us']:7.1f} µs   "
                  f"unit of work {figures['unit_of_work_us']:7.1f} µs{reads}", flush=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
