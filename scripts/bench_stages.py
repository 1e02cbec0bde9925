"""Per-stage cost of a request from a py-spy profile (`--gil`, raw format) of
the server processes: each sample goes to the stage of its innermost frame
that names one. Used by scripts/benchmark.py --profile; standalone:

    python scripts/bench_stages.py PROFILE.txt --requests N --rate 250 [--cpu-ms 1.1]
"""

from __future__ import annotations

import argparse
import collections
import pathlib

# (stage, substrings of a frame "function (file:line)"), innermost match wins.
STAGES = [
    ("SQL: psycopg, pool, unit of work", ("psycopg/", "sqlalchemy/", "kernel/data/")),
    ("rate limits (leases; Redis when one runs out)", ("limits/", "redis/")),
    ("authentication (cached credential)", ("kernel/transport/auth.py",)),
    ("authorization and client address", ("kernel/transport/access.py", "_client_ip", "_is_trusted")),
    ("validation", ("transport/validation.py",)),
    ("the RPC's servicer and its response message", ("servicer.py", "service.py", "transport/convert.py", "protobuf/")),
    ("pipeline (interceptor, context, headers)", ("transport/", "kernel/ids.py")),
    ("gRPC framework (Python side)", ("grpc/", "concurrent/futures", "threading.py")),
]


def stage_samples(path: pathlib.Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        stage = "other"
        for frame in reversed(stack.split(";")):
            stage = next((name for name, marks in STAGES if any(m in frame for m in marks)), "")
            if stage:
                break
        counts[stage or "other"] += int(n)
    return counts


def table(paths: list[pathlib.Path], requests: float, rate: float, cpu_ms: float | None = None) -> str:
    counts: collections.Counter[str] = collections.Counter()
    for path in paths:
        counts += stage_samples(path)
    per_sample_us = 1e6 / rate / max(1.0, requests)
    rows = ["| stage | µs per request | share |", "|---|---|---|"]
    held = sum(counts.values()) * per_sample_us
    for name, _ in [*STAGES, ("other", ())]:
        if counts[name]:
            us = counts[name] * per_sample_us
            rows.append(f"| {name} | {us:,.0f} | {us / held:.0%} |")
    rows.append(f"| **holding the GIL, total** | **{held:,.0f}** | |")
    if cpu_ms is not None:
        rows.append(f"| gRPC C core and other work outside the GIL | {max(0.0, cpu_ms * 1000 - held):,.0f} | |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profiles", nargs="+", type=pathlib.Path)
    p.add_argument("--requests", type=float, required=True, help="requests served while the profiles were taken")
    p.add_argument("--rate", type=float, default=250, help="py-spy samples per second")
    p.add_argument("--cpu-ms", type=float, help="measured Python CPU ms per request")
    a = p.parse_args()
    print(table(a.profiles, a.requests, a.rate, a.cpu_ms))


if __name__ == "__main__":
    main()
