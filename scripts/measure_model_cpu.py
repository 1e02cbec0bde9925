"""CPU per request of the two model-using writes, split by process: the runners' part (the model's work) and
the service's own (servers, Envoy, PostgreSQL, Redis).

Starts `up` (as scripts/hostile_load.py does), makes an Enterprise organization with its limits lifted, then
for `POST /v1/chat/sessions/{id}/messages` (a reply, not streamed) and `POST /v1/personas` (a persona's
creation) sends N requests one after another and reads each process's CPU time (utime + stime from
/proc/<pid>/stat, PostgreSQL's backends included) before and after: CPU ms per request by kind of process.

    .venv/bin/python scripts/measure_model_cpu.py [--chat 200] [--personas 60]

On code without runners (before the split) the model's work is in the servers' column.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import tempfile
import time

import httpx
from hostile_load import Service

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
KINDS = ("servers", "runners", "envoy", "postgres", "redis")


def _cpu_ms(pid: int) -> float:
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_MS  # utime, stime


def _children(pid: int) -> list[int]:
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        children = task / "children"
        if children.exists():
            found += [int(p) for p in children.read_text().split()]
    return found


def _processes(service: Service) -> dict[str, list[int]]:
    """The stack's processes by kind (PostgreSQL: the postmaster and its backends, read each time)."""
    state = json.loads((service.data_dir / "stack-pids.json").read_text())
    kinds: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for pid in state["pids"]:
        try:
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except FileNotFoundError:
            continue
        if b"serve" in argv:
            kinds["servers"].append(pid)
        elif b"runner" in argv:
            kinds["runners"].append(pid)
        elif comm == "envoy":
            kinds["envoy"].append(pid)
        elif "redis" in comm:
            kinds["redis"].append(pid)
    postmaster = int((pathlib.Path(state["postgres_data"]) / "postmaster.pid").read_text().split()[0])
    kinds["postgres"] = [postmaster, *_children(postmaster)]
    return kinds


def _sample(service: Service) -> dict[str, dict[int, float]]:
    return {kind: {pid: _cpu_ms(pid) for pid in pids} for kind, pids in _processes(service).items()}


def _per_request(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]], n: int) -> dict[str, float]:
    # A backend that exited meanwhile is missed; one that started counts from 0 (it did all its work here).
    return {kind: sum(ms - before[kind].get(pid, 0.0) for pid, ms in after[kind].items()) / n for kind in KINDS}


def measure(service: Service, label: str, n: int, send) -> dict[str, float]:
    for i in range(min(5, n)):  # warm-up: prepared statements, caches, the model's tables
        send(-1 - i)
    before, started = _sample(service), time.monotonic()
    for i in range(n):
        send(i)
    elapsed = time.monotonic() - started
    split = _per_request(before, _sample(service), n)
    split["wall"] = 1000 * elapsed / n
    print(f"{label}: {n} requests, {json.dumps({k: round(v, 2) for k, v in split.items()})}", flush=True)
    return split


def first_frames(client: httpx.Client, session: str, n: int) -> None:
    """A stream's first frame at rest: `n` streamed chat replies one after another, the time from sending
    each to its first event (p50/p99)."""
    waits = []
    for i in range(n):
        started = time.monotonic()
        with client.stream("POST", f"/v1/chat/sessions/{session}/messages", params={"stream": "true"},
                           json={"content": f"One more thing, number {i}."}) as r:
            lines = r.iter_lines()
            while not next(lines).startswith("data:"):
                pass
            waits.append(time.monotonic() - started)
            for _ in lines:
                pass
    waits.sort()
    print(f"first frame of a streamed reply at rest ({n}): p50 {1000 * waits[n // 2]:.1f} ms, "
          f"p99 {1000 * waits[min(n - 1, int(n * 0.99))]:.1f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chat", type=int, default=200, help="chat replies (not streamed)")
    parser.add_argument("--personas", type=int, default=60, help="persona creations")
    parser.add_argument("--first-frames", type=int, default=100, help="streamed replies timed to their first frame")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(pathlib.Path(tmp) / "data")
        try:
            _, auth = service.org("Measured")
            with httpx.Client(base_url=service.base, headers=auth, timeout=60) as client:
                persona = client.post("/v1/personas", json={"intent": "A ferry pilot who sings"}).json()["id"]
                sessions = [client.post("/v1/chat/sessions", json={"personaId": persona}).json()["sessionId"]
                            for _ in range(10)]

                def reply(i: int) -> None:
                    r = client.post(f"/v1/chat/sessions/{sessions[i % len(sessions)]}/messages",
                                    json={"content": f"How was the crossing today, part {i}?"})
                    # (A reply that drifted from the persona's voice is refused, a 4xx, after the same model work.)
                    assert r.status_code < 500, r.text

                def create(i: int) -> None:
                    r = client.post("/v1/personas", json={"intent": f"A cartographer number {i} of night markets"})
                    assert r.status_code in (200, 201), r.text

                rows.append(("POST /v1/chat/sessions/{id}/messages", measure(service, "chat reply", args.chat, reply)))
                rows.append(("POST /v1/personas", measure(service, "persona creation", args.personas, create)))
                first_frames(client, sessions[0], args.first_frames)
        finally:
            service.stop()
    print()
    print("| request | wall ms | runners (model) | servers | Envoy | PostgreSQL | Redis | service's own | total |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, split in rows:
        own = split["servers"] + split["envoy"] + split["postgres"] + split["redis"]
        print(f"| {name} | {split['wall']:.1f} | {split['runners']:.1f} | {split['servers']:.1f} | {split['envoy']:.1f} "
              f"| {split['postgres']:.1f} | {split['redis']:.1f} | {own:.1f} | {own + split['runners']:.1f} |")


if __name__ == "__main__":
    main()
