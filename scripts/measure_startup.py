"""Measure what starting Persona Service's processes costs.

Two parts:
- each process role's entry import (what `persona-service serve`, `runner`
  and `worker` import before they do anything), in fresh interpreters: CPU
  seconds (user + system, the interpreter's own start included) and wall
  seconds, median of `--imports` runs;
- a test stack (tests/support.py: make_stack, then running) until its start
  returns (its servers, runner and webhook worker ready, Envoy answering),
  on an embedded PostgreSQL seeded from migrated copy, median of `--stacks`;
- with `--up`, `persona-service up` on free ports until it prints "is up in
  N s": the first run of a fresh data dir includes initdb and every
  migration (cold), the later ones reuse them (warm); then its stop: SIGTERM
  until every process of its group has exited (issue 46: "within a few seconds").

    .venv/bin/python scripts/measure_startup.py [--imports 5] [--stacks 3] [--up --runs 4]
    .venv/bin/python scripts/measure_startup.py --stacks 0 --against /work/main/.venv/bin/python

It measures the interpreter it runs under and the package that interpreter
imports (run it with another checkout's .venv to measure that checkout).
With `--against PYTHON`, each role's imports alternate between this
interpreter and PYTHON (another checkout's), one fresh interpreter each in
turn, so both see the same load: on a shared machine a process's CPU seconds
grow with the load too, and two runs minutes apart do not compare.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

UP_LINE = re.compile(r"is up in ([0-9.]+)s")

# What each role imports before it runs (persona_service.cli's main loads the
# registry for every command that is not standalone, then the command's own module).
ROLES = {
    "server": ["persona_service.cli", "persona_service.registry", "persona_service.process.server"],
    "runner": ["persona_service.cli", "persona_service.registry", "persona_service.process.runner"],
    "webhook-worker": ["persona_service.cli", "persona_service.registry", "persona_service.webhooks.worker"],
    "cli (--help)": ["persona_service.cli"],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_up(data_dir: str) -> tuple[float, float]:
    """`up`'s own "is up in N s", and the seconds from SIGTERM until its process group is gone."""
    env = {**os.environ, "PERSONA_DATA_DIR": data_dir, "PERSONA_HTTP_PORT": str(free_port()),
           "PERSONA_GRPC_PORT": str(20000 + free_port() % 10000)}
    proc = subprocess.Popen([sys.executable, "-m", "persona_service.cli", "up"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            match = UP_LINE.search(line)
            if match:
                return float(match.group(1)), stop_seconds(proc)
        raise SystemExit(f"`up` exited without becoming ready (exit {proc.wait()}):\n{''.join(seen[-20:])}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def stop_seconds(proc: subprocess.Popen) -> float:
    """SIGTERM to `proc`, then the seconds until no process of its group (its children) runs: a zombie counts
    as stopped (init reaps an orphan up to 2 s later on this machine)."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    while _running_in_group(proc.pid) and time.monotonic() - started < 120:
        time.sleep(0.02)
    return time.monotonic() - started


def _running_in_group(group: int) -> bool:
    import psutil

    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def import_cost(modules: list[str], python: str = sys.executable) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of a fresh interpreter that imports `modules` and exits."""
    code = "; ".join(f"import {m}" for m in modules)
    started = time.perf_counter()
    proc = subprocess.Popen([python, "-c", code])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"importing {modules} failed (exit {proc.returncode})")
    return usage.ru_utime + usage.ru_stime, wall


def compare_imports(other: str, count: int) -> None:
    """Each role's entry import, `count` fresh interpreters of this one and of `other`, alternating."""
    print(f"entry imports, CPU s (median of {count} fresh interpreters each, alternating): this one | {other}")
    for role, modules in ROLES.items():
        mine, theirs = [], []
        for _ in range(count):
            mine.append(import_cost(modules)[0])
            theirs.append(import_cost(modules, other)[0])
        change = statistics.median(m - t for m, t in zip(mine, theirs, strict=True))
        print(f"  {role:15s} {statistics.median(mine):5.2f} | {statistics.median(theirs):5.2f}   "
              f"median of the pairs' differences {change:+.2f}", flush=True)


def stack_seconds(root: str, count: int) -> list[float]:
    """Seconds from make_stack to a started test stack, `count` times, in this process."""
    sys.path.insert(0, os.path.join(root, "tests"))
    from support import make_stack, running, seed_postgres

    times = []
    for _ in range(count):
        with tempfile.TemporaryDirectory() as data_dir:
            seed_postgres(pathlib.Path(data_dir))  # the migrated copy is made once, outside the timing
            started = time.perf_counter()
            with running(make_stack(pathlib.Path(data_dir))):
                times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="`up` runs (the first is cold)")
    parser.add_argument("--imports", type=int, default=5, help="fresh interpreters per role")
    parser.add_argument("--stacks", type=int, default=3, help="test stacks started (0: none)")
    parser.add_argument("--up", action="store_true", help="also time `persona-service up`")
    parser.add_argument("--root", default=os.getcwd(), help="the checkout whose tests/support.py starts stacks")
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter: imports alternate")
    args = parser.parse_args()
    if args.against:
        compare_imports(args.against, args.imports)
    elif args.imports:
        print(f"entry imports (median of {args.imports} fresh interpreters):")
    for role, modules in ROLES.items() if args.imports and not args.against else ():
        costs = [import_cost(modules) for _ in range(args.imports)]
        cpu = statistics.median(c for c, _ in costs)
        wall = statistics.median(w for _, w in costs)
        print(f"  {role:15s} CPU {cpu:5.2f} s   wall {wall:5.2f} s", flush=True)
    if args.stacks:
        times = stack_seconds(args.root, args.stacks)
        print(f"test stack start to ready (median of {len(times)}): {statistics.median(times):.2f} s "
              f"({', '.join(f'{t:.1f}' for t in times)})", flush=True)
    if not args.up:
        return
    with tempfile.TemporaryDirectory() as data_dir:
        runs = [run_up(data_dir) for _ in range(args.runs)]
    times, stops = [up for up, _ in runs], [stop for _, stop in runs]
    warm = times[1:] or times
    print(f"up, cold (initdb + migrations): {times[0]:.2f} s")
    print(f"up, warm (median of {len(warm)}):     {statistics.median(warm):.2f} s")
    print(f"stop, SIGTERM until every process is gone (median of {len(stops)}): {statistics.median(stops):.2f} s "
          f"({', '.join(f'{t:.1f}' for t in stops)})")


if __name__ == "__main__":
    main()
