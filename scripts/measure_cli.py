"""Measure how long `persona-service` takes for what users type most.

Times `--help`, `--version`, `status` and `mint-jwt` (wall clock of the
console script, median of N runs). `status` and `mint-jwt` act on an
instance this script starts (`persona-service up` in a temporary project
directory, on free ports; an organization made with `bootstrap`), run from
that directory as a user would, with nothing set in the environment.

    .venv/bin/python scripts/measure_cli.py [--runs 7] [--source DIR]

--source: time the CLI of another checkout (its server/ and gen/python on
PYTHONPATH; e.g. `git archive HEAD | tar -x -C DIR` for a before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from persona_service.process.stack import free_port

CLI = pathlib.Path(sys.executable).parent / "persona-service"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PERSONA_") and k not in ("DATABASE_URL", "REDIS_URL", "PYTHONPATH")}
    return {**env, **extra}


def timed(args: list[str], env: dict[str, str], cwd: pathlib.Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run([str(CLI), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise SystemExit(f"`persona-service {' '.join(args)}` failed ({result.returncode}): {result.stderr}")
    return statistics.median(times)


def start_up(project: pathlib.Path, env: dict[str, str]) -> subprocess.Popen:
    env = {**env, "PERSONA_HTTP_PORT": str(free_port()), "PERSONA_GRPC_PORT": str(free_port(1000))}
    proc = subprocess.Popen([str(CLI), "up"], env=env, cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Stop with"):
            return proc
    raise SystemExit(f"`up` exited without becoming ready (exit {proc.wait()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--source", type=pathlib.Path, help="another checkout whose CLI to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = pathlib.Path(tmp)
        env = clean_env(XDG_STATE_HOME=str(project / "state"))
        up = start_up(project, env)  # this checkout's `up`: only the CLI under test changes
        try:
            made = subprocess.run([str(CLI), "bootstrap", "--org-name", "Measured"], env=env, cwd=project,
                                  capture_output=True, text=True, timeout=120)
            if made.returncode != 0:
                raise SystemExit(f"`persona-service bootstrap` failed: {made.stderr}")
            org = json.loads(made.stdout)
            if args.source:  # after `bootstrap`: its migrations may differ from this checkout's
                source = args.source.resolve()
                env["PYTHONPATH"] = f"{source / 'server'}:{source / 'gen' / 'python'}"
            results = {
                "--help": timed(["--help"], env, project, args.runs),
                "--version": timed(["--version"], env, project, args.runs),
                "status": timed(["status"], env, project, args.runs),
                "mint-jwt": timed(["mint-jwt", "--user-id", org["userId"], "--org-id", org["orgId"],
                                   "--workspace-id", org["workspaceId"]], env, project, args.runs),
            }
        finally:
            os.killpg(up.pid, signal.SIGTERM)
            up.wait(60)
    for name, seconds in results.items():
        print(f"persona-service {name:<10} {seconds:.2f} s (median of {args.runs})")


if __name__ == "__main__":
    main()
