"""scripts/topology.py's wait for a runner, without a topology: a runner that exits before its ready file
fails the wait at once with its exit status and its log's end. The backup/restore drill's `runner-1 did not
come up within 120s` could not tell a crash from a hang: the wait ignored the exit for 120 s and the bench
(no --dir) removed the log."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from topology import StackError, Topology  # noqa: E402  (scripts/ is not a package)


@pytest.fixture
def top(tmp_path):
    made = Topology(tmp_path / "top", nodes=1, stream_nodes=1, runners=1)
    yield made
    shutil.rmtree(made.db_dir, ignore_errors=True)


def _runner(top: Topology, code: str) -> subprocess.Popen:
    """A stand-in for `persona-service runner`: `code` run with the runner's log as its output."""
    top._runner_ready(0).parent.mkdir(parents=True, exist_ok=True)
    with open(top._log("runner-0"), "ab") as out:
        return subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)


def test_a_runner_that_exits_fails_the_wait_at_once_with_its_status_and_log(top):
    popen = _runner(top, "import sys; print('Traceback: boom at startup', flush=True); sys.exit(3)")
    started = time.monotonic()
    with pytest.raises(StackError, match=r"(?s)runner-0 exited \(3\).*boom at startup"):
        top.wait_runner(0, popen)  # (its 120 s: before, the whole of them, then "did not come up")
    assert time.monotonic() - started < 20
    assert not any(what == "runner-0: ready" for _, what in top.steps)


def test_a_runner_that_hangs_is_reported_with_its_log(top):
    popen = _runner(top, "import time; print('stuck before ready', flush=True); time.sleep(60)")
    try:
        with pytest.raises(StackError, match=r"(?s)runner-0 did not come up within 1s.*stuck before ready"):
            top.wait_runner(0, popen, timeout=1)
    finally:
        popen.kill()
        popen.wait()


def test_a_runner_that_writes_its_ready_file_is_ready(top):
    ready = top._runner_ready(0)
    popen = _runner(top, f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('1'); time.sleep(60)")
    try:
        top.wait_runner(0, popen, timeout=60)
        assert [what for _, what in top.steps] == ["runner-0: ready"]
    finally:
        popen.kill()
        popen.wait()
