"""scripts/replica_throughput.py (`measure_replica_reads.py --throughput`) without a server: the logged
statements become pgbench scripts whose values are variables (parameters, as the service sends them), a
statement pgbench would misread is refused, the arguments parse, and a saved run renders docs/capacity.md's
table. The measurement itself needs Debian's PostgreSQL and minutes: a script, not a test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "volume"))
import replica_throughput as rt  # noqa: E402
from plans import Statement  # noqa: E402


def test_values_become_variables_and_null_stays_in_place():
    logged = Statement("SELECT id FROM personas WHERE org_id = $1 AND created_at < $2 AND x = $12 AND y IS $3 "
                       "ORDER BY created_at::date LIMIT $11", {1: "'o1'", 2: "'2024-01-01 10:00:00+00'",
                                                                12: "'it''s'", 3: "NULL", 11: "'101'"})
    script = rt.to_script("personas", "r0", [logged], weight=7)
    assert script.weight == 7
    assert script.sql == ["SELECT id FROM personas WHERE org_id = :r0_0_1 AND created_at < :r0_0_2 AND "
                          "x = :r0_0_12 AND y IS NULL ORDER BY created_at::date LIMIT :r0_0_11"]
    # Values with colons (a timestamp) are variables, never in the SQL pgbench scans for `:name`.
    assert script.variables == {"r0_0_1": "o1", "r0_0_2": "2024-01-01 10:00:00+00", "r0_0_12": "it's",
                                "r0_0_11": "101"}
    assert script.text("SELECT 1") == f"SELECT 1;\n{script.sql[0]};\n"


def test_a_colon_pgbench_would_take_for_a_variable_is_refused():
    with pytest.raises(ValueError, match="variable"):
        rt.to_script("bad", "r1", [Statement("SELECT '10:30' FROM events", {})])


def test_pgbench_output_and_arguments():
    out = ("number of transactions actually processed: 1234\nnumber of failed transactions: 0 (0.000%)\n"
           "latency average = 6.482 ms\ntps = 1230.5 (without initial connection time)\n")
    assert rt.parse_pgbench(out, 1.0) == rt.Outcome(reads=1234, failed=0, seconds=1.0, latency_ms=6.482, tps=1230.5)
    args = rt.parse_args(["--clients", "1,8", "--seconds", "2"])
    assert args.clients == [1, 8] and args.seconds == 2 and args.rounds == 2
    assert rt.parse_args([]).clients == [1, 8]
    with pytest.raises(SystemExit):
        rt.parse_args(["--rounds", "0"])


def _round(server: str, clients: int, rate: float, cpu: dict[str, float]) -> dict:
    return {"server": server, "on": server.split(",")[0], "clients": clients, "reads": int(rate * 10), "failed": 0, "seconds": 10.0,
            "reads_per_s": rate, "tps": rate, "latency_ms": 6.5, "cpu_ms_per_read": cpu,
            "client_cpu_ms_per_read": 0.05, "aborted_clients": 0, "load": 1.0}


def test_a_saved_run_renders_the_table(tmp_path):
    saved = {
        "commit": "abc1234", "started": "2026-12-02 18:00 UTC", "cpus": 2, "postgres": "15",
        "load_start": [3.5, 3.0, 2.0], "load_end": [4.0, 3.0, 2.0], "seconds": 200, "write_rate": 20.0,
        "seed": {"scale": 0.02, "counts": {"personas": 4000, "events": 20000}},
        "mix": [{"call": "personas", "weight": 680, "statements": ["SELECT 1"]}],
        "rest_cpu_ms_per_s": {"replica": {"replay": 3.0}},
        "lag": {"replica": {"samples": 3, "p50_ms": 1.0, "max_ms": 2.5, "max_bytes_behind": 2048}},
        "rounds": [_round("primary", 8, 1000.0, {"primary": 0.7, "replica": 0.01}),
                   _round("replica", 8, 900.0, {"primary": 0.02, "replica": 0.8}),
                   _round("replica", 8, 950.0, {"primary": 0.02, "replica": 0.7}),
                   _round("primary", 8, 1100.0, {"primary": 0.7, "replica": 0.01}),
                   _round("replica, list only", 8, 990.0, {"primary": 0.02, "replica": 0.6})],
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_replica_reads.py"), "--throughput",
                           "--from-json", str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| primary | 8 | 1050 (1000, 1100) | 6.50 | 0.700 | 1000 | 0.010 | 0.050 |" in lines
    assert "| replica | 8 | 925 (900, 950) | 6.50 | 0.750 | 933 | 0.020 | 0.050 |" in lines
    assert "| replica, list only | 8 | 990 (990) | 6.50 | 0.600 | 1167 | 0.020 | 0.050 |" in lines
    assert any(line.startswith("replica / primary, reads/s at the same clients: 0.88 at 8 (list only: 0.94)")
               for line in lines)
    assert any("replica rounds p50 1.0 ms, max 2.5 ms, at most 2 kB not replayed" in line
               for line in lines)
    assert lines[-1].startswith("commit abc1234") and "load average (1 min) at start / end 3.5 / 4.0" in lines[-1]
