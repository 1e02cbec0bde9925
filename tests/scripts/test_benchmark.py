"""`make bench` end to end, briefly: every run of scripts/benchmark.py on the
real stack (Envoy, servers, PostgreSQL, Redis), the FastAPI peer, the
floor and the same-work floor (whose answer the tool checks against the
service's), one second each without warm-up. Throughput is not judged here (that is the tool's
job, on a quiet machine); what is judged is that each run served without
errors and was metered, and that the table and verdicts are printed."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest
from support import ROOT

SCRIPTS = ROOT / "scripts"
RUNS = ["json", "grpc", "peer", "floor", "samework", "samework-grpc", "paced", "write: chat message",
        "write: create persona"]


# What `make bench-tools` installs: the load generators, and the peer's packages (pyproject's `bench` extra,
# which `make install` leaves out: without them the peer cannot start).
BENCH_TOOLS = bool(shutil.which("wrk") and shutil.which("h2load")) and all(
    importlib.util.find_spec(module) for module in ("asyncpg", "orjson", "starlette", "uvicorn", "uvloop", "httptools"))


@pytest.mark.skipif(not BENCH_TOOLS, reason="make bench-tools installs wrk, h2load and the peer's packages")
def test_every_run_serves_without_errors_and_is_metered(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "benchmark.py"), "--scale", "1", "--seconds", "1", "--warmup", "0",
         "--concurrency", "4", "--json-out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = {r["run"]: r for r in json.loads(out.read_text())}
    assert sorted(results) == sorted(RUNS)
    for run, r in results.items():
        assert r["errors"] == 0 and r["rps"] > 0, r
        assert r["cpu_ms"]["python"] > 0 and r["cpu_ms"]["loadgen"] >= 0, r
        # The whole service: every role serving it, not Python alone.
        roles = {"python", "envoy"} if run == "floor" else {"python", "redis", "postgres"}
        assert roles <= set(r["cpu_ms"]), r
        assert r["cpu_ms"]["service"] >= r["cpu_ms"]["python"]
        assert r["switches"]["service"] > 0, r  # context switches are metered too
    assert "envoy" not in results["peer"]["cpu_ms"]  # the peer answers HTTP itself
    assert "| N | run | req/s |" in done.stdout
    assert "- N=1: JSON" in done.stdout and "the floor (Envoy + grpcio, constant answer)" in done.stdout
    assert "json CPU/request" in done.stdout and "grpc CPU/request" in done.stdout  # against the same-work floor


def test_stage_table_assigns_each_sample_to_its_innermost_stage(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    import bench_stages

    profile = tmp_path / "p.txt"
    profile.write_text(
        "process;_worker (grpc/_server.py:1);handle (persona_service/kernel/transport/pipeline.py:9);"
        "execute (psycopg/cursor.py:3) 30\n"
        "process;_worker (grpc/_server.py:1);handle (persona_service/kernel/transport/pipeline.py:9) 10\n"
        "process;_serve (grpc/_server.py:2) 60\n"
    )
    # 100 samples at 100/s over 1,000 requests: 1,000 µs held, 1 ms each.
    table = bench_stages.table([profile], requests=1000, rate=100, cpu_ms=1.5)
    assert "| SQL: psycopg, pool, unit of work | 300 | 30% |" in table
    assert "| pipeline (interceptor, context, headers) | 100 | 10% |" in table
    assert "| gRPC framework (Python side) | 600 | 60% |" in table
    assert "| **holding the GIL, total** | **1,000** | |" in table
    assert "| gRPC C core and other work outside the GIL | 500 | |" in table
