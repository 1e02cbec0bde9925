"""The pre-imported process template (process.template): a forked child is what `subprocess.Popen` of
`python -m <module>` would have started (its arguments, environment, directory, session, log, cores, exit
status, signals), with its own Prometheus files; a child the template cannot stand for starts afresh; nothing
outlives the template."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import pytest
from persona_service.process.supervisor import Child, Supervisor
from persona_service.process.template import Template, TemplateChild
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

# Imported by the template (so its metrics are made there) and run in each child: says what the child sees,
# writes a metric, then exits with its first argument, or waits for a signal ("wait").
PROBE = textwrap.dedent("""
    import json, os, signal, sys
    from persona_service.kernel import metrics

    if __name__ == "__main__":
        metrics.REPLAYS.inc()
        print(json.dumps({"probe": os.environ.get("PROBE"), "cwd": os.getcwd(), "pid": os.getpid(),
                          "sid": os.getsid(0), "cpus": sorted(os.sched_getaffinity(0)), "argv": sys.argv[1:],
                          "stdin": sys.stdin.read()}), flush=True)
        if sys.argv[1] == "wait":
            signal.pause()
        if sys.argv[1] == "raise":
            raise RuntimeError("planted")
        sys.exit(int(sys.argv[1]))
""")


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    code = tmp_path_factory.mktemp("probe")
    (code / "template_probe.py").write_text(PROBE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(code))
        made = Template.start(tmp_path_factory.mktemp("template"), ["template_probe"])
    yield made
    made.stop()


def _env(template: Template, metrics: pathlib.Path, **extra: str) -> dict[str, str]:
    metrics.mkdir(exist_ok=True)
    return {**os.environ, "PYTHONPATH": template._env["PYTHONPATH"], "PROMETHEUS_MULTIPROC_DIR": str(metrics), **extra}


def _spawn(template: Template, tmp_path: pathlib.Path, name: str, *args: str, **extra: str) -> TemplateChild:
    return template.spawn(
        [sys.executable, "-m", "template_probe", *args],
        _env(template, tmp_path / name, **extra),
        tmp_path / f"{name}.log",
    )


def _said(tmp_path: pathlib.Path, name: str) -> dict:
    return json.loads((tmp_path / f"{name}.log").read_text().splitlines()[0])


def _replays(metrics: pathlib.Path) -> float:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(metrics))
    return registry.get_sample_value("persona_idempotent_replays_total") or 0.0


def test_a_child_is_what_popen_would_start(template, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    child = _spawn(template, tmp_path, "one", "3", PROBE="one")
    assert child.wait(60) == 3
    said = _said(tmp_path, "one")
    assert said["probe"] == "one" and said["argv"] == ["3"] and said["cwd"] == str(tmp_path)
    assert said["pid"] == child.pid and said["sid"] == child.pid  # its own session
    assert said["stdin"] == ""  # /dev/null
    assert child.poll() == 3 and child.returncode == 3


def test_each_child_has_its_own_environment_and_prometheus_files(template, tmp_path):
    # Planted: two children of one template, each with its own variable and metrics folder; each sees its own,
    # and its samples land in its own folder under its own pid, none in the template's.
    first, second = (_spawn(template, tmp_path, name, "0", PROBE=name) for name in ("first", "second"))
    assert first.wait(60) == 0 and second.wait(60) == 0
    for child, name in ((first, "first"), (second, "second")):
        assert _said(tmp_path, name)["probe"] == name
        assert (tmp_path / name / f"counter_{child.pid}.db").exists(), sorted((tmp_path / name).iterdir())
        assert _replays(tmp_path / name) == 1.0
    assert _replays(template.socket_path.parent / "template-metrics") == 0.0


def test_exit_statuses_and_signals_are_a_processes(template, tmp_path):
    raised = _spawn(template, tmp_path, "raised", "raise")
    assert raised.wait(60) == 1
    assert "RuntimeError: planted" in (tmp_path / "raised.log").read_text()
    waiting = _spawn(template, tmp_path, "waiting", "wait")
    with pytest.raises(subprocess.TimeoutExpired):
        waiting.wait(0.2)
    waiting.terminate()
    assert waiting.wait(60) == -signal.SIGTERM
    killed = _spawn(template, tmp_path, "killed", "wait")
    os.kill(killed.pid, signal.SIGKILL)  # by pid, as the tests kill a stack's process
    assert killed.wait(60) == -signal.SIGKILL
    killed.kill()  # reaped already: nothing is sent


def test_a_child_is_pinned_before_it_runs(template, tmp_path):
    cores = {sorted(os.sched_getaffinity(0))[-1]}
    child = template.spawn(
        [sys.executable, "-m", "template_probe", "0"],
        _env(template, tmp_path / "m"),
        tmp_path / "pinned.log",
        cpus=cores,
    )
    assert child.wait(60) == 0
    assert _said(tmp_path, "pinned")["cpus"] == sorted(cores)


def test_only_what_the_template_stands_for_is_forked(template, tmp_path):
    env = _env(template, tmp_path / "m")
    python = [sys.executable, "-m"]
    assert template.can_fork([*python, "persona_service.cli", "serve"], env)
    for argv in ([*python, "other.module"], ["/usr/bin/python3", "-m", "persona_service.cli"], ["envoy", "-c", "x"]):
        assert not template.can_fork(argv, env), argv
    # What a fresh interpreter would decide otherwise at its start or at import:
    for changed in (
        {"PYTHONPATH": "/elsewhere"},
        {"PERSONA_EXTRA_MODULES": "probe_module"},
        {"COVERAGE_PROCESS_START": "pyproject.toml"},
        {"PYTHONHASHSEED": "1"},
        {"GRPC_ENABLE_FORK_SUPPORT": "1"},
    ):
        assert not template.can_fork([*python, "persona_service.cli", "serve"], {**env, **changed}), changed
    without_metrics = {k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    assert not template.can_fork([*python, "persona_service.cli", "serve"], without_metrics)


def test_the_supervisor_restarts_a_forked_child(template, tmp_path):
    """As a stack's: a child killed by pid is seen exited and forked again."""
    supervisor = Supervisor(template=template)
    # A service module that waits: the reaper, while its parent (the template) lives; it has nothing to stop.
    argv = [
        sys.executable,
        "-m",
        "persona_service.process.reaper",
        str(template.process.pid),
        str(tmp_path / "no-pids.json"),
    ]
    child = Child("reaper", argv, _env(template, tmp_path / "m"), tmp_path / "supervised.log")
    first = supervisor.start(child)
    assert isinstance(first, TemplateChild)
    supervisor.watch(interval=0.05)
    try:
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        for _ in range(1200):  # (a hang guard of a minute, not a measure)
            if child.restarts >= 1:
                break
            supervisor._stopping.wait(0.05)
        assert child.proc is not None and child.proc.pid != first.pid and child.proc.poll() is None
    finally:
        supervisor.stop()
        for proc in (first, child.proc):
            if proc is not None:
                proc.kill()
                proc.wait(60)


def test_nothing_outlives_the_template(tmp_path, template, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", template._env["PYTHONPATH"])
    alone = Template.start(tmp_path / "alone", ["template_probe"])
    left = alone.spawn(
        [sys.executable, "-m", "template_probe", "wait"], _env(template, tmp_path / "m"), tmp_path / "left.log"
    )
    alone.stop()
    assert alone.process.returncode == 0
    assert not pathlib.Path(f"/proc/{left.pid}").exists()  # killed and reaped
    assert not alone.socket_path.exists() and not (tmp_path / "alone" / "template-metrics").exists()


def test_a_socket_not_listening_yet_is_not_an_answer(tmp_path):
    """As a starting template's socket is between its bind and its listen: the start loop asks again, where a
    refused connect once broke it (AttributeError on a reader never made), losing a worker's stacks."""
    path = tmp_path / "t.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(str(path))  # bound, not listening: a connect is refused
        idle = subprocess.Popen([sys.executable, "-c", "pass"])
        idle.wait()
        assert Template(path, idle, {})._answers() is False
