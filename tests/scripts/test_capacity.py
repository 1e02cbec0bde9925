"""scripts/capacity.py's plan, on paper, from saved runs (no stack): a replica's CPU per routed read comes from a
replica throughput run (`measure_replica_reads.py --throughput --json`), not from the stack's own PostgreSQL
CPU per list, and docs/capacity.md carries the plan the checked-in runs print."""

from __future__ import annotations

import json
import subprocess
import sys

from support import ROOT

RUNS = ROOT / "docs" / "capacity-runs"


def _plan(*extra: str) -> list[str]:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "capacity.py"), "--from-json",
                           str(RUNS / "capacity.json"), *extra], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("The plan's measurements")):]


def _round(server: str, clients: int, ms: float) -> dict:
    on = server.split(",")[0]
    return {"server": server, "on": on, "clients": clients, "cpu_ms_per_read": {on: ms, "primary": 0.01}}


def test_the_replica_figures_come_from_the_replica_run(tmp_path):
    run = {"commit": "abc1234", "started": "2026-12-02 18:00 UTC", "load_start": [3.0], "load_end": [4.0],
           "rounds": [_round("primary", 8, 0.2), _round("replica", 1, 9.0), _round("replica", 8, 0.4),
                      _round("replica", 8, 0.6), _round("replica, list only", 8, 0.1)]}
    path = tmp_path / "replica.json"
    path.write_text(json.dumps(run))
    lines = _plan("--replica-json", str(path))
    # The routed rounds at the most clients (median 0.5 ms), not 1 client's, nor the list alone's.
    assert any(line.startswith("- lists/s a replica core sustains") and line.endswith("0.500 CPU ms a read, the "
                                                                                          "replica run's): 1400")
               for line in lines)
    assert "scripts/replica_throughput.py at abc1234, 2026-12-02 18:00 UTC, routed reads at 8 clients" in lines[0]
    # 100x: 112.6 lists/s (48.2 + 32.2 + 32.2) at 0.5 ms, at 70%.
    replicas = next(line for line in lines if line.startswith("| PostgreSQL replicas"))
    assert replicas.endswith("| 0.08 cores |"), replicas
    assert any("postgres replica 1244x" in line for line in lines)


def test_docs_carry_the_plan_the_checked_in_runs_print():
    doc = (ROOT / "docs" / "capacity.md").read_text().splitlines()
    missing = [line for line in _plan() if line and line not in doc]
    assert not missing, "docs/capacity.md: rerun scripts/capacity.py --from-json docs/capacity-runs/capacity.json"
