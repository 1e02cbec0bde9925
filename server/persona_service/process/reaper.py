"""The stack's reaper: a small process `up` starts beside everything else.
If `up` dies without stopping the stack (SIGKILL, a crash), the reaper
stops what it started, PostgreSQL and Redis included, so nothing is
orphaned. It reads the pids to stop from a file `up` keeps current.

    python -m persona_service.process.reaper <up pid> <pids file>
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import time
from typing import TypedDict

GRACE_SECONDS = 10.0


class ReaperState(TypedDict, total=False):
    """The pids file `up` keeps current (stack.Stack._record_pids): the processes it started, and PostgreSQL's
    data directory ("" when the database is not the stack's own), whose postmaster.pid names the server."""

    pids: list[int]
    postgres_data: str


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(state: ReaperState) -> None:
    pids = [int(p) for p in state.get("pids", [])]
    postgres = state.get("postgres_data")
    if postgres:
        pid_file = pathlib.Path(postgres) / "postmaster.pid"
        if pid_file.exists():
            pids.append(int(pid_file.read_text().split()[0]))
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main() -> None:
    parent, path = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while alive(parent) and os.getppid() == parent:
        time.sleep(0.5)
    if path.exists():  # `up` removes the file once it stopped the stack itself
        reap(json.loads(path.read_text()))
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
