"""The embedded PostgreSQL stops with the last process that joined it, even
after a joiner was killed with SIGKILL (it never left pgserver's list)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil

JOIN = "import pathlib, sys; from persona_service.kernel.process.embedded import postgres_url; postgres_url(pathlib.Path(sys.argv[1]))"


def postmaster(directory) -> int | None:
    pid_file = directory / "postmaster.pid"
    return int(pid_file.read_text().splitlines()[0]) if pid_file.exists() else None


def test_a_killed_joiner_does_not_keep_the_server_running(tmp_path):
    directory = tmp_path / "postgres"
    killed = subprocess.Popen([sys.executable, "-c", f"{JOIN}; import time; time.sleep(300)", str(directory)])
    try:
        deadline = time.monotonic() + 120
        while killed.pid not in _joiners(directory):
            assert time.monotonic() < deadline, "the first process never joined"
            time.sleep(0.2)
    finally:
        killed.kill()
        killed.wait()
    assert killed.pid in _joiners(directory)  # SIGKILL: it never left the list
    server = postmaster(directory)
    assert server and psutil.pid_exists(server)

    subprocess.run([sys.executable, "-c", JOIN, str(directory)], check=True, timeout=120)  # joins, exits normally

    deadline = time.monotonic() + 30
    while psutil.pid_exists(server):
        assert time.monotonic() < deadline, "PostgreSQL outlived the last process that joined it"
        time.sleep(0.2)


def _joiners(directory) -> list[int]:
    path = directory / ".handle_pids.json"
    return json.loads(path.read_text()) if path.exists() else []

