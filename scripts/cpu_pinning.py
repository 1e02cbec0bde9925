"""The service on some cores and its load on the others: a machine of that
size with the load generator elsewhere (`--server-cpus` of the load scripts)."""

from __future__ import annotations

import os


def cpu_set(spec: str) -> set[int]:
    """`0-1,4` -> {0, 1, 4}; empty -> empty."""
    cpus: set[int] = set()
    for part in filter(None, spec.split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def load_cpus(service: set[int]) -> set[int]:
    """The cores left to the load: every core this process may use but the service's."""
    left = os.sched_getaffinity(0) - service
    if not left:
        raise SystemExit(f"--server-cpus {sorted(service)} leaves no core for the load")
    return left
