"""The share of each benchmark's reads that a replica takes (issue 49): the reads whose RPC declares
`read_may_lag` (proto/persona/v1/options.proto), counted over the requests each benchmark sends; and, with
`--throughput`, the reads per second a streaming replica sustains for that mix against its primary's.

    python scripts/measure_replica_reads.py     # JSON on stdout; docs/scaling-out.md "Reads from replicas"
    nice python scripts/measure_replica_reads.py --throughput [--scale 0.02] [--clients 1,8] [--seconds 10]
                                                # scripts/replica_throughput.py: docs/capacity.md

Each request is resolved to its RPC by the HTTP bindings the edge serves (the descriptors' google.api.http
rules). Mixes: scripts/benchmark.py's read runs (json, grpc, paced: one read), scripts/topology.py's load
(its readers, once a persona is known), and scripts/bench_volume.py's catalogue, weighted by the requests
it sends per call at its defaults (`requests` alone, then `in_flight` clients of `requests` each, after
the `depth` pages a deep call walks first; a SCIM walk counted as `depth` pages too).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

import bench_volume
from google.api import annotations_pb2
from persona_service.kernel.transport.policy import find_services, method_table
from persona_service.registry import MODULES

REQUESTS, DEPTH, IN_FLIGHT = 40, 20, 16  # bench_volume.py's defaults


@dataclass(frozen=True)
class Route:
    pattern: re.Pattern[str]
    rpc: str
    may_lag: bool


def routes() -> list[Route]:
    """Every GET binding, most specific (fewest variables) first, as the edge matches them."""
    services = find_services(MODULES.service_names)
    table = method_table(services)
    found = []
    for service in services:
        for method in service.methods:
            rule = method.GetOptions().Extensions[annotations_pb2.http]
            path = f"/{service.full_name}/{method.name}"
            for binding in (rule, *rule.additional_bindings):
                if binding.get:
                    pattern = re.sub(r"\{[^}]+\}", "[^/]+", binding.get)
                    found.append(Route(re.compile(f"^{pattern}$"), path, table[path].policy.read_may_lag))
    return sorted(found, key=lambda r: r.pattern.pattern.count("[^/]+"))


def share(requests: list[tuple[str, int]], table: list[Route]) -> dict[str, object]:
    """(path, weight) pairs: the weight of those that may lag over all, and which RPCs they are."""
    total = moved = 0
    rpcs: dict[str, int] = {}
    for path, weight in requests:
        route = next(r for r in table if r.pattern.match(path))
        total += weight
        if route.may_lag:
            moved += weight
            rpcs[route.rpc.rsplit("/", 1)[1]] = rpcs.get(route.rpc.rsplit("/", 1)[1], 0) + weight
    return {"requests": total, "off_primary": moved, "fraction": round(moved / total, 3), "rpcs": rpcs}


PLACEHOLDERS = {"persona_id": "p1", "deep_persona_id": "p2", "session_id": "s1", "heavy_user_id": "u1",
                "endpoint_id": "e1", "scim_user_name": "user1", "listing_id": "l1", "invoice_id": "i1",
                "scim_user_id": "su1", "scim_group_id": "sg1", "org_id": "o1", "workspace_id": "w1"}


def weight(call: bench_volume.Call) -> int:
    """The requests the volume benchmark sends for `call` at its defaults."""
    runs = 1 + IN_FLIGHT  # the single client's run and each in-flight client's
    return runs * REQUESTS + (DEPTH if call.deep or call.scim_deep == "walk" else 0)


def volume_mix() -> list[tuple[str, int]]:
    return [(call.path, weight(call)) for call in bench_volume.calls(PLACEHOLDERS)]


def may_lag(path: str, table: list[Route]) -> bool:
    return next(r for r in table if r.pattern.match(path)).may_lag


def main() -> int:
    if "--throughput" in sys.argv[1:]:  # the replica's reads/s against the primary's (replica_throughput.py)
        import replica_throughput

        return replica_throughput.main([a for a in sys.argv[1:] if a != "--throughput"])
    table = routes()
    mixes = {
        "benchmark.py (json, grpc, paced: GET /v1/chat/sessions/{id})": [("/v1/chat/sessions/s1", 1)],
        "topology.py load (readers: GET /v1/personas/{id} and a list, in turn)": [("/v1/personas/p1", 1),
                                                                                    ("/v1/personas", 1)],
        "bench_volume.py catalogue": volume_mix(),
    }
    json.dump({name: share(mix, table) for name, mix in mixes.items()}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
