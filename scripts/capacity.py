"""CPU per operation per component, the capacity it gives, and the deployment for a tenant mix (docs/capacity.md).

Starts `up` (as scripts/measure_model_cpu.py does: 2 app servers, 1 stream server, 1 runner, the webhook
worker, Envoy, the embedded PostgreSQL and Redis) on the offline model, with an Enterprise organization whose
limits are lifted and a webhook endpoint subscribed to every event (the volume seed's big tenant has one:
as many deliveries as events). Then, one request after another, a fixed number of each operation of the
service's mix: writes (persona creation and update, chat session start, chat reply), reads (the hot read
`GET /v1/chat/sessions/{id}`, a persona by id, lists), a streamed chat reply. Each process's CPU (utime +
stime, /proc/<pid>/stat) is read before and after each batch; every PostgreSQL backend is summed into
"postgres". The stack's background (timers, polls, lease renewals), measured at rest, is taken off at its
rate times each batch's window. Output: CPU ms per operation per component, and ops/s one core of that
component sustains at 70% utilisation (700 / ms).

Then a second stack whose model is a stand-in (the tests' OpenAI-compatible stub) that answers every call
after a set latency: the runner's CPU per call through HTTP, the model calls per operation (counted by
the stub), and the replies/s one runner gives with the calls waiting on the latency (a latency costs no
CPU but holds the runner's turn: its capacity is its concurrent turns / latency).

Last, on paper: the volume seed's big tenant (scripts/seed_volume.py `Sizes`) as requests/s of each
operation (assumptions in `Mix`), at 1x, 10x and 100x, and the cores and nodes each component needs. A
replica's CPU per routed read is not this stack's (one client, every statement of the request, whatever
PostgreSQL did meanwhile) but PostgreSQL's own under load: `measure_replica_reads.py --throughput --json`'s
run (scripts/replica_throughput.py), read from `--replica-json` (the checked-in run by default).

    nice .venv/bin/python scripts/capacity.py [--scale 1] [--latency 0.25] [--json out.json]
    .venv/bin/python scripts/capacity.py --from-json docs/capacity-runs/capacity.json   # docs/capacity.md's plan
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import os
import pathlib
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx
from hostile_load import Service
from measure_model_cpu import Postgres, _cpu_ms, _stack_processes
from seed_volume import Sizes

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMPONENTS = ("app server", "stream server", "runner", "webhook worker", "envoy", "redis", "postgres")
SERVERS, STREAM_SERVERS = 2, 1
UTILISATION = 0.7
IDLE_SECONDS = 5.0
RUNS = ROOT / "docs" / "capacity-runs"  # the runs docs/capacity.md's plan is printed from
REPLICA_RUN = RUNS / "replica-throughput.json"
Sample = dict[str, dict[int, float]]


# --- the stack's processes and their CPU ---------------------------------------------------------------


def _environ(pid: int, name: str) -> str:
    for item in pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        key, _, value = item.decode(errors="replace").partition("=")
        if key == name:
            return value
    return ""


def components(service: Service, pg: Postgres) -> dict[str, list[int]]:
    """Each component's processes: the servers split by port (the stream servers' come after the others')."""
    stack = _stack_processes(service)
    first_stream_port = int(service.env["PERSONA_GRPC_PORT"]) + SERVERS
    streams = [pid for pid in stack["server"] if int(_environ(pid, "PERSONA_GRPC_PORT") or 0) >= first_stream_port]
    return {"app server": [pid for pid in stack["server"] if pid not in streams], "stream server": streams,
            "runner": stack["runner"], "webhook worker": stack["webhook worker"], "envoy": stack["envoy"],
            "redis": stack["redis"], "postgres": pg.pids()}


def sample(procs: Callable[[], dict[str, list[int]]]) -> Sample:
    return {name: {pid: _cpu_ms(pid) for pid in pids} for name, pids in procs().items()}


def spent(before: Sample, after: Sample) -> dict[str, float]:
    """CPU ms each component spent between two samples (a process started meanwhile counts from 0)."""
    return {name: sum(ms - before.get(name, {}).get(pid, 0.0) for pid, ms in after[name].items())
            for name in COMPONENTS}


@dataclasses.dataclass
class Meter:
    procs: Callable[[], dict[str, list[int]]]
    idle_rate: dict[str, float] = dataclasses.field(default_factory=dict)  # ms per second at rest

    def rest(self) -> None:
        time.sleep(0.5)
        before = sample(self.procs)
        time.sleep(IDLE_SECONDS)
        self.idle_rate = {k: v / IDLE_SECONDS for k, v in spent(before, sample(self.procs)).items()}

    def measure(self, n: int, send: Callable[[int], None], workers: int = 1) -> dict[str, float]:
        """CPU ms per call of `send` by component, less the background at rest; `wall` ms per call."""
        for i in range(3):  # warm-up: prepared statements, caches
            send(-1 - i)
        time.sleep(0.3)
        before, started = sample(self.procs), time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(send, range(n)))
        elapsed = time.monotonic() - started
        time.sleep(0.3)  # what the calls set off in the background (webhook deliveries) is theirs
        used = spent(before, sample(self.procs))
        window = elapsed + 0.3
        split = {k: (used[k] - self.idle_rate.get(k, 0.0) * window) / n for k in COMPONENTS}
        split["wall"] = 1000 * elapsed / n
        return split


# --- the operations ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    kind: str  # write, read (by id), list (a read that may lag: a replica may serve it), stream
    n: int
    send: Callable[[int], None]


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code < 300, f"{response.request.url.path}: {response.status_code} {response.text}"
    return response.json() if response.content else {}


class Tenant:
    """The measured organization: a persona, chat sessions, a webhook endpoint (when given) for every event."""

    def __init__(self, client: httpx.Client, receiver_url: str | None) -> None:
        self.client = client
        if receiver_url:
            _ok(client.post("/v1/webhooks", json={"url": receiver_url, "events": ["*"]}))
        self.persona = _ok(client.post("/v1/personas", json={"intent": "A ferry pilot who sings"}))["id"]
        self.sessions = [self.start_session() for _ in range(5)]

    def start_session(self) -> str:
        return str(_ok(self.client.post("/v1/chat/sessions", json={"personaId": self.persona}))["sessionId"])

    def session(self, i: int) -> str:
        return self.sessions[i % len(self.sessions)]

    def reply(self, i: int) -> None:
        r = self.client.post(f"/v1/chat/sessions/{self.session(i)}/messages",
                             json={"content": f"How was the crossing today, part {i}?"})
        assert r.status_code < 500, r.text  # (a reply that drifted from the voice is a 4xx, after the same work)

    def stream(self, i: int) -> None:
        with self.client.stream("POST", f"/v1/chat/sessions/{self.session(i)}/messages", params={"stream": "true"},
                                json={"content": f"Tell me about the harbour, part {i}."}) as r:
            assert r.status_code == 200, r.read()
            for _ in r.iter_lines():
                pass

    def create(self, i: int) -> None:
        _ok(self.client.post("/v1/personas", json={"intent": f"A cartographer number {i} of night markets"}))

    def update(self, i: int) -> None:
        _ok(self.client.patch(f"/v1/personas/{self.persona}", json={"displayName": f"Ferry pilot {i}"}))

    def get(self, path: str, params: dict[str, Any] | None = None) -> Callable[[int], None]:
        def read(_i: int) -> None:
            _ok(self.client.get(path, params=params))
        return read


def operations(t: Tenant, scale: float) -> list[Op]:
    def n(count: int) -> int:
        return max(5, int(count * scale))

    page = {"limit": 50}
    return [
        Op("persona creation", "write", n(30), t.create),
        Op("persona update", "write", n(60), t.update),
        Op("chat session start", "write", n(60), lambda _i: t.sessions.append(t.start_session())),
        Op("chat reply", "write", n(60), t.reply),
        Op("chat reply, streamed", "stream", n(40), t.stream),
        Op("hot read (chat session)", "read", n(300), t.get(f"/v1/chat/sessions/{t.session(0)}")),
        Op("persona by id", "read", n(200), t.get(f"/v1/personas/{t.persona}")),
        Op("chat messages list", "read", n(150), t.get(f"/v1/chat/sessions/{t.session(0)}/messages", {"limit": 20})),
        Op("persona list", "list", n(150), t.get("/v1/personas", page)),
        Op("events list", "list", n(150), t.get("/v1/events", page)),
        Op("audit list", "list", n(100), t.get("/v1/audit/events", page)),
    ]


def run_offline(scale: float) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """CPU ms per operation by component, and each operation's kind."""
    from topology import Receiver

    results: dict[str, dict[str, float]] = {}
    kinds: dict[str, str] = {}
    with stack({"PERSONA_WEBHOOKS_ALLOW_PRIVATE": "1"}) as (service, meter):
        with httpx.Client(base_url=service.base, headers=service.auth, timeout=60) as client:
            tenant = Tenant(client, Receiver().url)
            meter.rest()
            print(f"background at rest, CPU ms/s: {_fmt(meter.idle_rate)}", flush=True)
            for op in operations(tenant, scale):
                results[op.name], kinds[op.name] = {**meter.measure(op.n, op.send), "n": op.n}, op.kind
                print(f"{op.name} ({op.kind}, {op.n}): {_fmt(results[op.name])}", flush=True)
    return results, kinds


IN_FLIGHT = 8


def run_stand_in(latency: float, scale: float) -> dict[str, dict[str, float]]:
    """The model-using operations with every model call taking `latency` s: CPU by component (one client), the
    model calls per operation (counted by the stub, the warm-up's included) and operations/s with IN_FLIGHT
    clients at once (bound by the latency and the runner's turns, not by CPU)."""
    from topology import slow_model  # here: scripts/topology.py loads the service, which --from-json never needs

    model = slow_model(latency)
    n = max(3, int(10 * scale))
    results: dict[str, dict[str, float]] = {}
    try:
        with stack(model.stack_env()) as (service, meter):
            with httpx.Client(base_url=service.base, headers=service.auth, timeout=120) as client:
                tenant = Tenant(client, None)
                meter.rest()
                for name, send in (("chat reply", tenant.reply), ("persona creation", tenant.create),
                                   ("chat reply, streamed", tenant.stream)):
                    before = len(model.requests)
                    split = meter.measure(n, send)
                    split["model calls"] = (len(model.requests) - before) / (n + 3)
                    started = time.monotonic()
                    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT) as pool:
                        list(pool.map(send, range(IN_FLIGHT)))
                    split[f"ops/s at {IN_FLIGHT} in flight"] = IN_FLIGHT / (time.monotonic() - started)
                    results[name] = {**split, "n": n}
                    print(f"{name}, stand-in model at {latency} s a call ({n}): {_fmt(results[name])}", flush=True)
    finally:
        model.stop()
    return results


class stack:
    """`up` with `extra_env`, its components' processes and a meter; stopped on exit."""

    def __init__(self, extra_env: dict[str, str]) -> None:
        self.extra_env = {"PERSONA_SERVER_PROCESSES": str(SERVERS),
                          "PERSONA_STREAM_SERVER_PROCESSES": str(STREAM_SERVERS), **extra_env}

    def __enter__(self) -> tuple[Service, Meter]:
        self.tmp = tempfile.TemporaryDirectory()
        self.service = Service(pathlib.Path(self.tmp.name) / "data", extra_env=self.extra_env)
        pg = Postgres(self.service)
        return self.service, Meter(lambda: components(self.service, pg))

    def __exit__(self, *exc: object) -> None:
        self.service.stop()
        self.tmp.cleanup()


# --- on paper: the tenant mix and the deployment ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mix:
    """The volume seed's big tenant as a peak request rate. Assumptions (docs/capacity.md states them):
    the seed's rows were written over `months` (its invoices: 36), the peak hour runs at `peak` times the
    average rate, a chat exchange writes 2 messages, `streamed` of the replies are streamed, persona updates
    are the seed's share of persona.updated events (1 of its 5 event types), and `reads_per_write` reads
    follow each write, split as `read_shares`."""

    months: int = Sizes.invoices
    peak: float = 10.0
    streamed: float = 0.5
    reads_per_write: float = 10.0
    read_shares: tuple[tuple[str, float], ...] = (
        ("hot read (chat session)", 0.35), ("persona by id", 0.15), ("chat messages list", 0.15),
        ("persona list", 0.15), ("events list", 0.1), ("audit list", 0.1))

    def rates(self, sizes: Sizes, factor: float) -> dict[str, float]:
        per_second = factor * self.peak / (self.months * 30 * 86400)
        replies = sizes.messages / 2
        writes = {"persona creation": sizes.personas, "persona update": sizes.events / 5,
                  "chat session start": sizes.sessions, "chat reply": replies * (1 - self.streamed),
                  "chat reply, streamed": replies * self.streamed}
        rates = {name: rows * per_second for name, rows in writes.items()}
        reads = self.reads_per_write * sum(rates.values())
        return {**rates, **{name: reads * share for name, share in self.read_shares}}


@dataclasses.dataclass(frozen=True)
class ReplicaRead:
    """A read routed to a replica: the replica's PostgreSQL CPU ms for it (the replay-position query and the
    list statement), from a replica throughput run, and which run and rounds it comes from."""

    ms: float
    source: str


def replica_read(saved: dict[str, Any]) -> ReplicaRead:
    """The median CPU per read of the run's routed-read rounds (`replica`, not `replica, list only`: the plan's
    reads pay the replay-position query) at its most clients (the concurrency a replica serves at)."""
    routed = [r for r in saved["rounds"] if r["server"] == "replica"]
    clients = max(r["clients"] for r in routed)
    ms = statistics.median(r["cpu_ms_per_read"][r["on"]] for r in routed if r["clients"] == clients)
    load = "/".join(f"{saved[k][0]:.1f}" for k in ("load_start", "load_end") if k in saved)
    return ReplicaRead(ms, f"scripts/replica_throughput.py at {saved.get('commit')}, {saved.get('started')}, "
                           f"routed reads at {clients} clients" + (f" (load {load})" if load else ""))


def cores_needed(rates: dict[str, float], cpu: dict[str, dict[str, float]], component: str,
                 kinds: dict[str, str], only: str | None = None) -> float:
    """Cores of `component` at UTILISATION for `rates` (of the operations of kind `only`, when given)."""
    ms = sum(rate * max(0.0, cpu[op][component]) for op, rate in rates.items()
             if only is None or kinds[op] == only)
    return ms / 1000 / UTILISATION


RUN_WORKERS = 16  # a runner's run threads (PERSONA_RUN_WORKERS' default)


def held(rates: dict[str, float], stand_in: dict[str, dict[str, float]], kinds: dict[str, str],
         latency: float) -> tuple[float, float]:
    """With each model call taking `latency`: the runner turns (PERSONA_GENERATION_TURNS, 1 a runner by default)
    the unary operations' model calls hold at once (a call holds its turn for its whole length), and the run
    threads the streamed replies hold at once (each for its measured wall time)."""
    turns = sum(rate * stand_in[op]["model calls"] * latency
                for op, rate in rates.items() if op in stand_in and kinds[op] == "write")
    threads = sum(rate * stand_in[op]["wall"] / 1000
                  for op, rate in rates.items() if op in stand_in and kinds[op] == "stream")
    return turns, threads


def replica_cores(rates: dict[str, float], kinds: dict[str, str], replica: ReplicaRead) -> float:
    """Replica cores at UTILISATION for the reads that may lag, at the replica run's CPU per routed read."""
    return sum(rate for op, rate in rates.items() if kinds[op] == "list") * replica.ms / 1000 / UTILISATION


def deployment(rates: dict[str, float], cpu: dict[str, dict[str, float]], kinds: dict[str, str],
               node_cores: int, turns: tuple[float, float], replica: ReplicaRead) -> dict[str, str]:
    """Cores per component, and pods of `node_cores` (at least 2 of each kind, for a pod's loss); the reads
    that may lag leave the primary (their PostgreSQL CPU in this stack) for replicas (at `replica`'s CPU per
    read); runners by CPU and by `turns` (the model calls' turns and the streams' run threads held at once:
    runners at 1 turn and RUN_WORKERS threads, at UTILISATION)."""
    def need(component: str, only: str | None = None) -> float:
        return cores_needed(rates, cpu, component, kinds, only)

    def nodes(cores: float) -> str:
        return f"{cores:.2f} cores: {max(2, math.ceil(cores / node_cores))}"

    return {"app server pods": nodes(need("app server")),
            "Envoy (the app pods' sidecars)": f"{need('envoy'):.2f} cores",
            "stream server pods": nodes(need("stream server")),
            "runner pods, by CPU (offline model)": nodes(need("runner")),
            "runner pods, by model turns (stand-in)": f"{turns[0]:.2f} turns held: {math.ceil(turns[0] / UTILISATION)}",
            "runner pods, by run threads (stand-in)":
                f"{turns[1]:.2f} threads held: {math.ceil(turns[1] / RUN_WORKERS / UTILISATION)}",
            "webhook worker pods": nodes(need("webhook worker")),
            "PostgreSQL primary": f"{need('postgres') - need('postgres', 'list'):.2f} cores (+ a synchronous standby)",
            "PostgreSQL replicas (lists, at the replica run's CPU per read)": f"{replica_cores(rates, kinds, replica):.2f} cores",
            "Redis": f"{need('redis'):.2f} cores"}


# --- output -----------------------------------------------------------------------------------------------


def _fmt(values: dict[str, float]) -> str:
    return json.dumps({k: round(v, 2) for k, v in values.items()})


def print_tables(results: dict[str, dict[str, float]], kinds: dict[str, str]) -> None:
    print("\nCPU ms per operation (background at rest taken off; wall: ms per request, one client)\n")
    print("| operation | kind | n | wall | " + " | ".join(COMPONENTS) + " | total |")
    print("|---|---|---|---|" + "---|" * (len(COMPONENTS) + 1))
    for op, split in results.items():
        cells = " | ".join(f"{split[c]:.2f}" for c in COMPONENTS)
        print(f"| {op} | {kinds[op]} | {int(split['n'])} | {split['wall']:.1f} | {cells} "
              f"| {sum(split[c] for c in COMPONENTS):.2f} |")
    print(f"\nops/s per core of each component at {UTILISATION:.0%} utilisation ({1000 * UTILISATION:.0f} / ms; "
          "- where the operation costs it under 0.05 ms)\n")
    print("| operation | " + " | ".join(COMPONENTS) + " |")
    print("|---|" + "---|" * len(COMPONENTS))
    for op, split in results.items():
        cells = " | ".join(f"{1000 * UTILISATION / split[c]:.0f}" if split[c] >= 0.05 else "-" for c in COMPONENTS)
        print(f"| {op} | {cells} |")


def headroom(rates: dict[str, float], cpu: dict[str, dict[str, float]], kinds: dict[str, str],
             replica: ReplicaRead) -> dict[str, float]:
    """Per component, how many times today's mix one core of it carries at UTILISATION (PostgreSQL: the
    primary, and a replica for the lists): the order in which they saturate."""
    lists = replica_cores(rates, kinds, replica)
    found = {"postgres replica": 1 / lists if lists > 0 else math.inf}
    for component in COMPONENTS:
        cores = cores_needed(rates, cpu, component, kinds)
        if component == "postgres":
            cores -= cores_needed(rates, cpu, component, kinds, "list")
        found[component] = 1 / cores if cores > 0 else math.inf
    return found


def print_units(rates: dict[str, float], cpu: dict[str, dict[str, float]], kinds: dict[str, str],
                replica: ReplicaRead) -> None:
    """The issue's figures per core at UTILISATION, for the mix's operations of each kind, weighted by its rates."""
    def per_core(of: tuple[str, ...], component: str, table: dict[str, dict[str, float]] = cpu) -> str:
        return f"{1000 * UTILISATION / _weighted(rates, table, kinds, of, component):.0f}"

    app = {op: {"app": cpu[op]["app server"] + cpu[op]["envoy"]} for op in cpu}
    print(f"\nPer core at {UTILISATION:.0%}, the mix's operations weighted by their rates:\n")
    print(f"- writes/s a PostgreSQL primary core sustains (the write mix): {per_core(('write',), 'postgres')}")
    print(f"- reads/s an app node core sustains (servers + Envoy; reads and lists): "
          f"{per_core(('read', 'list'), 'app', app)}")
    print(f"- lists/s a replica core sustains (the lists that may lag, routed: {replica.ms:.3f} CPU ms a read, "
          f"the replica run's): {1000 * UTILISATION / replica.ms:.0f}")
    print(f"  (this stack's PostgreSQL CPU per list, every statement of the request at one client: "
          f"{per_core(('list',), 'postgres')}; the plan takes the replica run's)")
    print(f"- streamed replies/s a stream server core sustains: {per_core(('stream',), 'stream server')}")
    print(f"- model-using operations/s a runner core sustains (offline model; the writes and streams that cost it "
          f"CPU): {per_core(('write', 'stream'), 'runner')}")


def _weighted(rates: dict[str, float], cpu: dict[str, dict[str, float]], kinds: dict[str, str],
              of: tuple[str, ...], component: str) -> float:
    """CPU ms of `component` per operation of the kinds `of` that cost it any, averaged over their rates."""
    chosen = {op: rate for op, rate in rates.items() if kinds[op] in of and cpu[op].get(component, 0.0) > 0}
    return sum(rate * cpu[op][component] for op, rate in chosen.items()) / sum(chosen.values())


def print_plan(results: dict[str, dict[str, float]], kinds: dict[str, str], node_cores: int,
               stand_in: dict[str, dict[str, float]], latency: float, replica: ReplicaRead, source: str) -> None:
    mix, sizes = Mix(), Sizes()
    print(f"\nThe plan's measurements: CPU per operation and the stand-in's, {source}; a replica's CPU per "
          f"routed read, {replica.source}")
    print_units(mix.rates(sizes, 1), results, kinds, replica)
    print(f"\nThe volume seed's big tenant at its peak hour ({dataclasses.asdict(mix)}), requests/s:\n")
    factors = (1, 10, 100)
    print("| operation | " + " | ".join(f"{f}x" for f in factors) + " |")
    print("|---|" + "---|" * len(factors))
    all_rates = {f: mix.rates(sizes, f) for f in factors}
    for op in all_rates[1]:
        print(f"| {op} | " + " | ".join(f"{all_rates[f][op]:.3g}" for f in factors) + " |")
    print(f"\nDeployment (CPU at {UTILISATION:.0%}; pods of {node_cores} core(s), at least 2 of each):\n")
    plans = {f: deployment(all_rates[f], results, kinds, node_cores,
                           held(all_rates[f], stand_in, kinds, latency) if stand_in else (0.0, 0.0), replica)
             for f in factors}
    print("| component | " + " | ".join(f"{f}x" for f in factors) + " |")
    print("|---|" + "---|" * len(factors))
    for component in plans[1]:
        print(f"| {component} | " + " | ".join(plans[f][component] for f in factors) + " |")
    print(f"\nWhat saturates first: times today's mix one core of each component carries at {UTILISATION:.0%} "
          "(postgres: the primary; postgres replica: the lists, at the replica run's CPU per read)\n")
    ordered = sorted(headroom(all_rates[1], results, kinds, replica).items(), key=lambda item: item[1])
    print(" < ".join(f"{component} {times:.0f}x" for component, times in ordered))
    if stand_in:
        turns, threads = held(all_rates[1], stand_in, kinds, latency)
        print(f"one runner at {latency} s a model call: {UTILISATION / turns:.0f}x today's mix by its 1 turn, "
              f"{UTILISATION * RUN_WORKERS / threads:.0f}x by its {RUN_WORKERS} run threads")


def report(results: dict[str, dict[str, float]], kinds: dict[str, str], stand_in: dict[str, dict[str, float]],
           latency: float, node_cores: int, replica: ReplicaRead, source: str) -> None:
    print_tables(results, kinds)
    for op, split in stand_in.items():
        print(f"\n{op} with a stand-in model at {latency} s a call: {_fmt(split)}", end="")
    print()
    print_plan(results, kinds, node_cores, stand_in, latency, replica, source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="requests per batch times this")
    parser.add_argument("--latency", type=float, default=0.25, help="the stand-in model's seconds per call (0: none)")
    parser.add_argument("--node-cores", type=int, default=1,
                        help="cores per pod, for the plan (deploy/kubernetes: one Python process a pod, about a core)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the measurements here")
    parser.add_argument("--from-json", type=pathlib.Path, help="measure nothing: print a saved run's tables and plan")
    parser.add_argument("--replica-json", type=pathlib.Path, default=REPLICA_RUN,
                        help="a replica throughput run (measure_replica_reads.py --throughput --json): "
                             "the plan's CPU per read a replica serves")
    args = parser.parse_args()
    replica = replica_read(json.loads(args.replica_json.read_text()))
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        report(saved["offline"], saved["kinds"], saved["stand_in"], args.latency, args.node_cores, replica,
               saved.get("source", str(args.from_json)))
        return
    load = [os.getloadavg()[0]]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    started = time.monotonic()
    began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results, kinds = run_offline(args.scale)
    stand_in = run_stand_in(args.latency, args.scale) if args.latency > 0 else {}
    load.append(os.getloadavg()[0])
    source = (f"scripts/capacity.py at {commit.strip()}, {began}, --scale {args.scale} --latency {args.latency} "
              f"(load {load[0]:.1f}/{load[1]:.1f})")
    report(results, kinds, stand_in, args.latency, args.node_cores, replica, source)
    print(f"\ncommit {commit.strip()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, load average (1 min) at start / end {load[0]:.1f} / {load[1]:.1f}, "
          f"{time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"source": source, "offline": results, "kinds": kinds, "stand_in": stand_in,
                                         "load": load}, indent=1))


if __name__ == "__main__":
    main()
