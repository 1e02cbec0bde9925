"""Volume benchmark (#32): every list, filter, search and lookup of the API,
through Envoy, against a database seeded by scripts/seed_volume.py.

    make bench-volume                                   # seeds at BENCH_SCALE (default 1) then measures
    python scripts/bench_volume.py --seed-file .build/volume-seed.json --requests 50

Each call is measured single client (`--requests` sequential requests after a
warm-up) and at 16 in flight (16 clients, each `--requests` requests); a
"deep" call first walks `--depth` pages along nextCursor and then measures
that page. Before the stack starts, the retention purge of the seeded
soft-deleted personas (all due); at the end, a DSAR export of the heaviest
user (time, and the growth of the stack's Python processes' RSS while it
builds; scripts/measure_dsar.py measures the build's own peak). Results: stdout and
.build/bench-volume.json. The catalogue (`calls`) is also what
tests/volume/ replays to check every query's plan.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCIM = "/v1/auth/scim/v2"


@dataclasses.dataclass(frozen=True)
class Call:
    name: str
    path: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    deep: bool = False  # walk pages along nextCursor first, measure the page reached
    # SCIM pages by startIndex: measure half-way through the result, reached by walking every page from
    # startIndex 1 as Okta's import does ("walk": the page continues by keyset) or at once ("jump": an OFFSET).
    scim_deep: str = ""


def calls(seeded: dict[str, Any]) -> list[Call]:
    """Every list, filter, search and lookup the API offers, on the seeded big tenant."""
    persona, deep, session = seeded["persona_id"], seeded["deep_persona_id"], seeded["session_id"]
    user, endpoint, scim_name = seeded["heavy_user_id"], seeded["endpoint_id"], seeded["scim_user_name"]
    page = {"limit": 100}
    out = [
        Call("personas", "/v1/personas", page),
        Call("personas deep", "/v1/personas", page, deep=True),
        Call("personas state=flagged", "/v1/personas", {**page, "state": "flagged"}),
        Call("personas state=flagged deep", "/v1/personas", {**page, "state": "flagged"}, deep=True),
        Call("personas visibility=public", "/v1/personas", {**page, "visibility": "public"}, deep=True),
        Call("persona get", f"/v1/personas/{persona}"),
        Call("persona lineage (depth 50)", f"/v1/personas/{deep}/lineage"),
        Call("chat sessions", "/v1/chat/sessions", page),
        Call("chat sessions deep", "/v1/chat/sessions", page, deep=True),
        Call("chat sessions user=heavy", "/v1/chat/sessions", {**page, "userId": user}, deep=True),
        Call("chat sessions persona", "/v1/chat/sessions", {**page, "personaId": persona}),
        Call("chat sessions status=ended", "/v1/chat/sessions", {**page, "status": "ended"}, deep=True),
        Call("chat session get", f"/v1/chat/sessions/{session}"),
        Call("chat messages", f"/v1/chat/sessions/{session}/messages", {"limit": 20}),
        Call("events", "/v1/events", page),
        Call("events deep", "/v1/events", page, deep=True),
        Call("events type", "/v1/events", {**page, "type": "persona.forked"}, deep=True),
        Call("events persona", "/v1/events", {**page, "personaId": persona}),
        Call("audit", "/v1/audit/events", page, deep=True),
        Call("audit action", "/v1/audit/events", {**page, "action": "keys.create"}, deep=True),
        Call("audit outcome=failure", "/v1/audit/events", {**page, "outcome": "failure"}, deep=True),
        Call("audit actor", "/v1/audit/events", {**page, "actorUserId": user}, deep=True),
        Call("audit resource", "/v1/audit/events", {**page, "resourceType": "persona", "resourceId": "res-7"}),
        Call("webhooks", "/v1/webhooks"),
        Call("webhook deliveries", f"/v1/webhooks/{endpoint}/deliveries", page),
        Call("webhook deliveries deep", f"/v1/webhooks/{endpoint}/deliveries", page, deep=True),
        Call("marketplace tag", "/v1/marketplace/listings", {**page, "audienceTag": "education"}),
        Call("marketplace tag deep", "/v1/marketplace/listings", {**page, "audienceTag": "education"}, deep=True),
        Call("marketplace q", "/v1/marketplace/listings", {**page, "q": "Listing 42"}),
        # Every word 3 characters or more: the trigram indexes find the listings (`42` has no trigram).
        Call("marketplace q words", "/v1/marketplace/listings", {**page, "q": "Listing 4242"}),
        Call("scim users", f"{SCIM}/Users", {"count": 100}),
        Call("scim users deep", f"{SCIM}/Users", {"count": 100}, scim_deep="walk"),
        Call("scim users jump", f"{SCIM}/Users", {"count": 100}, scim_deep="jump"),
        Call("scim users eq", f"{SCIM}/Users", {"filter": f'userName eq "{scim_name}"'}),
        Call("scim users co", f"{SCIM}/Users", {"filter": 'userName co "user4242."', "count": 100}),
        Call("scim users sw", f"{SCIM}/Users", {"filter": 'userName sw "user4242"', "count": 100}),
        Call("scim users pr", f"{SCIM}/Users", {"filter": "externalId pr", "count": 100}),
        Call("scim users dateTime", f"{SCIM}/Users", {"filter": 'meta.lastModified gt "2024-01-02T00:00:00Z"',
                                                      "count": 100}),
        Call("scim users enterprise", f"{SCIM}/Users", {
            "filter": 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber eq "4242"'}),
        Call("scim groups", f"{SCIM}/Groups", {"count": 100}),
        Call("scim groups eq", f"{SCIM}/Groups", {"filter": 'displayName eq "Group 7"'}),
        Call("scim groups co", f"{SCIM}/Groups", {"filter": 'displayName co "oup 1234"', "count": 100}),
        Call("invoices", "/v1/billing/invoices", {"limit": 12}, deep=True),
        Call("moderation queue", "/v1/admin/moderation/queue", page),
        Call("moderation queue deep", "/v1/admin/moderation/queue", page, deep=True),
        Call("moderation queue stage", "/v1/admin/moderation/queue", {**page, "stage": "pii"}, deep=True),
        Call("privacy exports", "/v1/privacy/exports"),
        Call("keys", "/v1/keys"),
    ]
    return out


def next_cursor(body: dict[str, Any]) -> str:
    return body.get("nextCursor") or ""


def resolve(http: httpx.Client, call: Call, depth: int) -> dict[str, Any]:
    """The query parameters of the page to measure (for a deep call, `depth` pages in)."""
    params = dict(call.params)
    if call.scim_deep:
        total = http.get(call.path, params={**params, "count": 0}).raise_for_status().json()["totalResults"]
        if call.scim_deep == "jump":
            return {**params, "startIndex": max(1, total // 2)}
        start, count = 1, int(params["count"])
        while start + count <= total // 2:
            http.get(call.path, params={**params, "startIndex": start}).raise_for_status()
            start += count
        return {**params, "startIndex": start}
    if not call.deep:
        return params
    for _ in range(depth):
        body = http.get(call.path, params=params).raise_for_status().json()
        cursor = next_cursor(body)
        if not cursor:
            break
        params = {**call.params, "cursor": cursor}
    return params


def percentile(ordered: list[float], q: float) -> float:
    return round(ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))], 1)


def stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1), "p99_ms": percentile(ordered, 0.99)}


def timed(http: httpx.Client, path: str, params: dict[str, Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        response = http.get(path, params=params)
        out.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{path} {params}: {response.status_code} {response.text[:300]}")
    return out


def concurrent(make_client: Callable[[], httpx.Client], path: str, params: dict[str, Any], n: int,
               in_flight: int) -> list[float]:
    samples: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker():
        try:
            with make_client() as http:
                got = timed(http, path, params, n)
            with lock:
                samples.extend(got)
        except BaseException as exc:  # noqa: BLE001 - reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(in_flight)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return samples


def measure(make_client: Callable[[], httpx.Client], seeded: dict[str, Any], requests: int, depth: int,
            in_flight: int, only: str = "") -> list[dict[str, Any]]:
    rows = []
    with make_client() as http:
        for call in calls(seeded):
            if only and only not in call.name:
                continue
            try:
                params = resolve(http, call, depth)
                timed(http, call.path, params, 3)  # warm-up
                single = stats(timed(http, call.path, params, requests))
                loaded = stats(concurrent(make_client, call.path, params, max(1, requests // 4), in_flight))
                row = {"call": call.name, "single": single, f"at_{in_flight}": loaded,
                       "ratio": round(loaded["p99_ms"] / max(single["p99_ms"], 0.1), 1)}
            except Exception as exc:  # noqa: BLE001 - one failing call is a finding, not the end of the run
                row = {"call": call.name, "error": str(exc)[:300]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def dsar_export(http: httpx.Client, timeout: float) -> dict[str, Any]:
    """Request the heaviest user's export (the key's user) and wait for it, sampling the RSS of the
    stack's Python processes (servers and workers)."""
    import psutil

    procs = [p for p in psutil.Process().children(recursive=True) if "python" in p.name()]
    baseline = sum(p.memory_info().rss for p in procs)
    peak = baseline
    started = time.perf_counter()
    made = http.post("/v1/privacy/exports", json={})
    if made.status_code not in (200, 201, 202):
        return {"error": f"{made.status_code} {made.text[:300]}"}
    status = ""
    while time.perf_counter() - started < timeout:
        peak = max(peak, sum(p.memory_info().rss for p in procs))
        items = http.get("/v1/privacy/exports").json().get("items", [])
        status = items[0].get("status", "") if items else ""
        if status in ("ready", "failed", "completed", "succeeded", "PRIVACY_EXPORT_STATUS_READY"):
            break
        time.sleep(0.05)
    return {"status": status, "seconds": round(time.perf_counter() - started, 1),
            "server_rss_growth_mb": round((peak - baseline) / 2**20, 1)}


def retention_purge(database_url: str) -> dict[str, Any]:
    """The scheduled purge of soft-deleted personas past their grace (the seed's are all due), as its
    job runs it (a batch per transaction), timed before the stack starts (its scheduler would run it
    first)."""
    from persona_service.kernel.data.engine import make_engine
    from persona_service.personas.module import purge
    from persona_service.providers.local import LocalProvider

    engine = make_engine(database_url, pool_size=1)
    try:
        started = time.perf_counter()
        batches = purge(engine, LocalProvider())
        return {"purged": sum(batches), "batches": len(batches), "seconds": round(time.perf_counter() - started, 2)}
    finally:
        engine.dispose()


def start_stack(data_dir: pathlib.Path, database_url: str):
    from persona_service.kernel.settings import Settings
    from persona_service.process.stack import Stack, free_port
    from persona_service.registry import MODULES

    settings = Settings(data_dir=data_dir, database_url=database_url, redis_url=os.environ.get("REDIS_URL", ""),
                        http_port=free_port(), grpc_port=free_port(1000))
    # As many server processes as `up` runs (PERSONA_SERVER_PROCESSES, 2 by default): one GIL would
    # queue every call in flight behind the others whatever its query costs.
    ports = [settings.grpc_port] + [free_port(1000) for _ in range(settings.server_processes - 1)]  # stream ports too
    stack = Stack(settings, MODULES, grpc_ports=ports)
    stack.start()
    return stack


def table(rows: list[dict[str, Any]], in_flight: int) -> str:
    lines = [f"| call | single p50 | single p99 | {in_flight} in flight p99 | ratio |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['call']} | error: {r['error'][:80]} | | | |")
        else:
            lines.append(f"| {r['call']} | {r['single']['p50_ms']} | {r['single']['p99_ms']} | "
                         f"{r[f'at_{in_flight}']['p99_ms']} | {r['ratio']}× |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed-file", type=pathlib.Path, default=ROOT / ".build" / "volume-seed.json")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""),
                        help="as given to seed_volume.py (default: the embedded PostgreSQL under --data-dir)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=ROOT / ".build" / "volume")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--depth", type=int, default=20, help="pages walked before a deep call's page")
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--only", default="", help="measure the calls whose name contains this")
    parser.add_argument("--no-dsar", action="store_true")
    parser.add_argument("--no-purge", action="store_true", help="leave the seeded deleted personas alone")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / ".build" / "bench-volume.json")
    parser.add_argument("--server-cpus", default="",
                        help="cores for PostgreSQL and the stack alone (e.g. 0-1); the clients run on the others")
    args = parser.parse_args(argv)
    from cpu_pinning import cpu_set, load_cpus  # beside this script

    service_cpus = cpu_set(args.server_cpus)
    if service_cpus:  # what this thread starts from here on (PostgreSQL, Envoy, servers) inherits the mask
        others = load_cpus(service_cpus)
        os.sched_setaffinity(0, service_cpus)
    seeded = json.loads(args.seed_file.read_text())
    purge = None
    if not args.no_purge:
        from persona_service.kernel.data.embedded import postgres_url

        purge = retention_purge(args.database_url or postgres_url(args.data_dir / "postgres"))
        print(json.dumps({"retention_purge": purge}), flush=True)
    stack = start_stack(args.data_dir, args.database_url)
    if service_cpus:
        os.sched_setaffinity(0, others)
    try:
        headers = {"Authorization": f"Bearer {seeded['api_key']}"}

        def make_client() -> httpx.Client:
            return httpx.Client(base_url=stack.http_url, headers=headers, timeout=60)

        rows = measure(make_client, seeded, args.requests, args.depth, args.in_flight, args.only)
        result: dict[str, Any] = {"sizes": seeded["sizes"], "calls": rows, "retention_purge": purge}
        if not args.no_dsar:
            with make_client() as http:
                result["dsar_export"] = dsar_export(http, timeout=600)
            print(json.dumps({"dsar_export": result["dsar_export"]}), flush=True)
    finally:
        stack.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(table(rows, args.in_flight))
    return 0


if __name__ == "__main__":
    sys.exit(main())
