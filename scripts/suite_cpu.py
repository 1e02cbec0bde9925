"""Where the suite's CPU goes: runs pytest (arguments after `--` reach it) with this file as a plugin and
prints, as Markdown, CPU seconds (user + system) per folder and per file, and the processes the tests
started, by kind: how many, and their CPU. On a shared machine wall time is noise; CPU seconds and
process counts are not.

    .venv/bin/python scripts/suite_cpu.py -- tests/kernel/edge -p no:randomly

Per file: pytest's own CPU while the file's tests ran, plus the CPU of every child process pytest reaped
meanwhile (getrusage(RUSAGE_CHILDREN): a module stack's servers, runners, workers, Envoy and Redis, a
`persona-service up` and everything it reaped), plus the embedded PostgreSQL servers' CPU (pg_ctl
daemonises them, so no one reaps them: each server process and backend sampled from /proc). The session's
stack (tests/conftest.py) lives until the end: its processes' CPU is sampled from /proc every
SAMPLE_SECONDS and charged to the file that was running (the "session stack" column).

By kind: a sampler walks /proc every SAMPLE_SECONDS for pytest's descendants and the PostgreSQL servers
of its data dirs, names each process by its command line and keeps its last CPU reading. A process that
lives less than SAMPLE_SECONDS can be missed (a `git`, a quick CLI call), so counts are lower bounds.
Under pytest-xdist (`-n 2`) only the controller reports: the processes by kind and the total are right,
the per-file figures are not kept (the tests run in the workers).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_SECONDS = 0.5
REPORT_ENV = "SUITE_CPU_REPORT"
TICK = os.sysconf("SC_CLK_TCK")


def kind_of(argv: list[str]) -> str:
    """A process's kind from its command line."""
    text = " ".join(argv)
    if "persona_service.cli" in text or any(a.endswith("/persona-service") for a in argv[:2]):
        words = [a for a in argv[1:] if not a.startswith("-") and not a.endswith(("persona_service.cli", "persona-service"))]
        return f"persona-service {words[0] if words else '(none)'}"
    for name in ("envoy", "redis-server", "pg_ctl", "initdb", "pgbouncer", "wrk", "h2load", "chromium", "node", "npm",
                 "git", "make", "uv", "buf", "protoc"):
        if any(Path(a).name == name or Path(a).name.startswith(name + " ") for a in argv[:1]) or text.startswith(name):
            return name
    if argv and Path(argv[0]).name == "postgres" or text.startswith("postgres -D"):
        return "postgres server"
    if "persona_service.process.reaper" in text:
        return "reaper"
    if argv and "python" in Path(argv[0]).name:
        module = next((argv[i + 1] for i, a in enumerate(argv) if a == "-m" and i + 1 < len(argv)), "")
        script = next((Path(a).name for a in argv[1:] if a.endswith(".py")), "")
        return f"python {module or script or '-c'}"
    return Path(argv[0]).name if argv else "?"


def read_stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def read_argv(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


@dataclass
class Seen:
    kind: str
    cpu: float = 0.0  # the last reading
    session: bool = False  # part of the session's stack (its data dir is the session's)


@dataclass
class Meter:
    """The sampler and the per-file account."""

    session_dir: str = ""
    seen: dict[int, Seen] = field(default_factory=dict)
    charged: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))  # session stack per file
    postgres: dict[str, float] = field(default_factory=lambda: collections.defaultdict(float))  # other PostgreSQLs
    current: str = "(collection, session start)"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sample(self) -> None:
        me = os.getpid()
        stats = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit() and (stat := read_stat(pid)) is not None:
                stats[int(pid)] = stat
        children = collections.defaultdict(list)
        for pid, (ppid, _) in stats.items():
            children[ppid].append(pid)
        ours: set[int] = set()
        todo = [me]
        while todo:
            pid = todo.pop()
            for child in children.get(pid, ()):
                if child not in ours:
                    ours.add(child)
                    todo.append(child)
        with self.lock:
            for pid, (ppid, own) in stats.items():
                known = self.seen.get(pid)
                if known is None:
                    argv = read_argv(str(pid))
                    postmaster = bool(argv) and Path(argv[0]).name == "postgres" and "-D" in argv
                    parent = self.seen.get(ppid)
                    backend = parent is not None and parent.kind == "postgres server"
                    if pid not in ours and not backend and not (postmaster and self._ours(argv)):
                        continue
                    if backend:  # (or one of the server's helpers)
                        known = self.seen[pid] = Seen("postgres backend", session=parent.session)
                    else:
                        known = self.seen[pid] = Seen(kind_of(argv), session=self._session(pid, argv))
                cpu = own
                grown = max(0.0, cpu - known.cpu)
                known.cpu = cpu
                if known.session:
                    self.charged[self.current] += grown
                elif known.kind.startswith("postgres"):
                    self.postgres[self.current] += grown

    def _ours(self, argv: list[str]) -> bool:
        """A PostgreSQL server of this session's data dirs (under pytest's basetemp; not support's migrated copy,
        whose folder name other sessions' copies share)."""
        data = argv[argv.index("-D") + 1] if "-D" in argv[:-1] else ""
        return bool(self.session_dir) and data.startswith(str(Path(self.session_dir).parent))

    def _session(self, pid: int, argv: list[str]) -> bool:
        if not self.session_dir:
            return False
        if any(a.startswith(self.session_dir) for a in argv):  # Envoy's config, PostgreSQL's -D
            return True
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return False
        data = next((e[len(b"PERSONA_DATA_DIR="):].decode() for e in environ if e.startswith(b"PERSONA_DATA_DIR=")), "")
        return data.rstrip("/") == self.session_dir or cwd.startswith(self.session_dir)


# --- the plugin (pytest -p suite_cpu) ------------------------------------------------------------------

_meter = Meter()
_files: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
_stop = threading.Event()


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _sampler() -> None:
    while not _stop.wait(SAMPLE_SECONDS):
        _meter.sample()


def pytest_configure(config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # under xdist the controller samples every worker's processes
        os.environ.pop(REPORT_ENV, None)
    if not os.environ.get(REPORT_ENV):
        return
    threading.Thread(target=_sampler, name="suite-cpu", daemon=True).start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get(REPORT_ENV):
        yield
        return
    path = item.nodeid.split("::")[0]
    if "persona0" not in _meter.session_dir:
        _meter.session_dir = str(item.config._tmp_path_factory.getbasetemp() / "persona0")
    with _meter.lock:
        _meter.current = path
    me, kids = _cpu()
    yield
    me2, kids2 = _cpu()
    _files[path]["pytest"] += me2 - me
    _files[path]["reaped children"] += kids2 - kids
    with _meter.lock:
        _meter.current = "(between tests)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The last test's teardown stops the session's fixtures (its stack): that is the session's, not the file's."""
    if nextitem is not None or not os.environ.get(REPORT_ENV):
        yield
        return
    path = item.nodeid.split("::")[0]
    me, kids = _cpu()
    _meter.sample()
    with _meter.lock:  # what pytest reaps now, and was charged to the files already (PostgreSQL is not reaped)
        charged = sum(seen.cpu for pid, seen in _meter.seen.items()
                      if seen.session and not seen.kind.startswith("postgres") and os.path.exists(f"/proc/{pid}"))
    yield
    me2, kids2 = _cpu()
    _files["(session teardown)"]["reaped children"] -= charged
    for column, spent in (("pytest", me2 - me), ("reaped children", kids2 - kids)):
        _files[path][column] -= spent  # (the protocol's wrapper adds it to the file)
        _files["(session teardown)"][column] += spent




def pytest_unconfigure(config) -> None:
    report = os.environ.get(REPORT_ENV)
    if not report:
        return
    _stop.set()
    _meter.sample()
    for path, spent in _meter.charged.items():
        _files[path]["session stack"] += spent
    for path, spent in _meter.postgres.items():
        _files[path]["other PostgreSQL"] += spent
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for seen in _meter.seen.values():
        kinds[("session: " if seen.session else "") + seen.kind].append(seen.cpu)
    Path(report).write_text(json.dumps({"files": _files, "kinds": kinds}))


# --- the runner -----------------------------------------------------------------------------------------

def folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if path.count("/") > 1 else path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=15, help="how many of the costliest files to list")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest gets")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as folder:
        report = Path(folder) / "cpu.json"
        env = {**os.environ, REPORT_ENV: str(report),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "scripts"), os.environ.get("PYTHONPATH")]))}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_cpu", "-q", *args.pytest_args],
                                cwd=ROOT, env=env, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - started
        data = json.loads(report.read_text()) if report.exists() else {"files": {}, "kinds": {}}
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    files = {path: sum(parts.values()) for path, parts in data["files"].items()}
    folders: dict[str, float] = collections.defaultdict(float)
    for path, spent in files.items():
        folders[folder_of(path)] += spent
    print(f"\n## Suite CPU: pytest exit {result.returncode}; {total:.0f} CPU s reaped from pytest "
          "(it, and every process it or its children reaped; not the daemonised PostgreSQL servers); "
          f"{wall:.0f} s wall, load average {os.getloadavg()[2]:.1f} over the last 15 min at the end\n")
    columns = ("pytest", "reaped children", "session stack", "other PostgreSQL")
    print("| folder | CPU s |\n|---|---:|")
    for name, spent in sorted(folders.items(), key=lambda item: -item[1]):
        print(f"| {name} | {spent:.0f} |")
    print(f"\n| costliest files | CPU s | {' | '.join(columns)} |\n|---|---:|{'---:|' * len(columns)}")
    for path, spent in sorted(files.items(), key=lambda item: -item[1])[: args.top]:
        parts = data["files"][path]
        print(f"| {path} | {spent:.0f} | {' | '.join(f'{parts.get(c, 0):.0f}' for c in columns)} |")
    print("\n| processes started, by kind | count | CPU s | CPU s each (median) |\n|---|---:|---:|---:|")
    for kind, cpus in sorted(data["kinds"].items(), key=lambda item: -sum(item[1])):
        cpus.sort()
        print(f"| {kind} | {len(cpus)} | {sum(cpus):.0f} | {cpus[len(cpus) // 2]:.1f} |")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
