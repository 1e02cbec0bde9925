"""Measure how long `persona-service up` takes to be ready.

Runs `persona-service up` on free ports, reads the "is up in N s" line it
prints once Envoy and every server answer, stops it, and repeats: the first
run of a fresh data dir includes initdb and every migration (cold), the
later ones reuse them (warm). Also times one server process's import of the
whole service (what every server and worker pays at start).

    .venv/bin/python scripts/measure_startup.py [--runs 4]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile

UP_LINE = re.compile(r"is up in ([0-9.]+)s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_up(data_dir: str) -> float:
    env = {**os.environ, "PERSONA_DATA_DIR": data_dir, "PERSONA_HTTP_PORT": str(free_port()),
           "PERSONA_GRPC_PORT": str(20000 + free_port() % 10000)}
    proc = subprocess.Popen([sys.executable, "-m", "persona_service.cli", "up"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = UP_LINE.search(line)
            if match:
                return float(match.group(1))
        raise SystemExit(f"`up` exited without becoming ready (exit {proc.wait()})")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def import_seconds() -> float:
    code = "import time; t=time.perf_counter(); import persona_service.registry; print(time.perf_counter()-t)"
    return float(subprocess.check_output([sys.executable, "-c", code], text=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        times = [run_up(data_dir) for _ in range(args.runs)]
    imports = [import_seconds() for _ in range(5)]
    warm = times[1:] or times
    print(f"up, cold (initdb + migrations): {times[0]:.2f} s")
    print(f"up, warm (median of {len(warm)}):     {statistics.median(warm):.2f} s")
    print(f"import of the service (median of 5): {statistics.median(imports) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
