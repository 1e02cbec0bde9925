"""scripts/bench_floors.py briefly: every variant that needs no pyvoy
environment (grpcio sync and asyncio servers, Envoy with each part removed,
native gRPC through the edge, through a bare Envoy and straight to the
server), one second each. No number is judged (the tool's job, on a quiet
machine): each variant answered the same session without errors and was
metered, Envoy's CPU counted wherever Envoy served."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from support import ROOT

VARIANTS = ["sync", "aio", "-buffer", "-lua", "-accesslog", "-stats", "grpc", "grpc-bare", "grpc-direct"]


@pytest.mark.skipif(not (shutil.which("wrk") and shutil.which("h2load")), reason="make bench-tools installs wrk and h2load")
def test_every_floor_serves_without_errors_and_is_metered(tmp_path):
    out = tmp_path / "floors.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_floors.py"), "--variants", ",".join(VARIANTS), "--rounds", "1",
         "--seconds", "1", "--warmup", "0", "--concurrency", "4", "--json-out", str(out)],
        cwd=ROOT / "scripts", capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert sorted(results) == sorted(VARIANTS)
    for name, (run,) in results.items():
        assert run["errors"] == 0 and run["rps"] > 0, run
        assert run["cpu_ms"]["python"] > 0, run
        assert ("envoy" in run["cpu_ms"]) == (name != "grpc-direct"), run
    assert "| variant | req/s |" in done.stdout
