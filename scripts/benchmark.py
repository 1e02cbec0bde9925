"""Benchmark GET /v1/chat/sessions/{id} (authenticated, rate-limited) on the
real stack against a FastAPI peer measured in the same run.

    .venv/bin/python scripts/benchmark.py [--seconds 10] [--warmup 3] ...
    make bench BENCH_ARGS="--seconds 20"

What it does:
1. Starts the real stack (embedded PostgreSQL/Redis unless DATABASE_URL /
   REDIS_URL are set, migrations, the gRPC server, Envoy) on free ports with a
   temporary data dir, exactly as `persona-service up` does. Creates an
   Enterprise organization whose per-minute/day limits are raised through the
   `api.rate_limit.*` config items (the limiter runs on every request but
   never rejects), an API key with `chat:read` and one chat session.
2. Starts the FastAPI peer (scripts/bench_peer.py, one uvicorn worker) on the
   same PostgreSQL and Redis, doing the same per-request work.
3. Closed-loop throughput, one after the other after a warm-up each:
   JSON through Envoy (wrk), native gRPC through Envoy (h2load, h2c) and the
   FastAPI peer (wrk), all at the same concurrency. Then a paced (open-loop)
   run at --rate requests/s on the JSON path and the peer, latency measured
   from each request's scheduled send time (no coordinated omission).
4. Prints a markdown table with req/s, p50, p99, errors, the ratios against
   the peer and the targets. Exits 0 whether or not the targets are met.

wrk and h2load are Debian packages (`apt-get install -y wrk nghttp2-client`);
when missing they are installed when running as root, otherwise a Python
load generator is used instead (it competes with the server for the two
cores, so the numbers are lower and client-bound). The peer uses uvloop and
httptools when installed (`pip install uvloop httptools`; installed on demand
unless --no-install), as a production uvicorn would.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
PEER = ROOT / "scripts" / "bench_peer.py"
GRPC_METHOD = "/persona.v1.ChatService/GetChatSession"
JSON, GRPC, PEER_NAME = "JSON via Envoy", "native gRPC via Envoy", "FastAPI peer"

TARGET_JSON_RATIO = 1.0
TARGET_GRPC_RATIO = 1.5
TARGET_PACED_P99_MS = 15.0

WRK_REPORT = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\nBENCH_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,' ..
    '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


# --------------------------------------------------------------------------------------
# Python load generators (paced open-loop HTTP, and fallbacks for wrk / h2load).
# They run in a child process (`--_client`), so their CPU shows apart.
# --------------------------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = None
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def http_load(cfg: dict) -> dict:
    """Keep-alive HTTP/1.1 GETs on `connections` connections. With `rate`,
    request i is due at start + i/rate (open loop) and its latency counts from
    that time, so a stalled server shows in the latency (no coordinated
    omission); requests still unsent when the run ends count as `unsent`.
    Without `rate`, each connection sends as soon as it has its answer."""
    host, port, path = cfg["host"], cfg["port"], cfg["path"]
    rate, seconds, warmup = cfg.get("rate"), cfg["seconds"], cfg["warmup"]
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in cfg["headers"].items())
        + "\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    service: list[float] = []
    lags: list[float] = []
    errors = {"status": 0, "io": 0}
    counter = itertools.count()
    start = loop.time() + 0.2
    measure_from = start + warmup
    end = measure_from + seconds
    completed_in_window = 0

    async def worker() -> None:
        nonlocal completed_in_window
        reader = writer = None
        while loop.time() < end:
            if rate:
                due = start + next(counter) / rate
                if due >= end:
                    break
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            else:
                due = loop.time()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, port)
                sent = loop.time()
                writer.write(request)
                status = await asyncio.wait_for(_read_response(reader), 30)
                ok = 200 <= status < 300
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                ok = False
                status = 0
                if writer is not None:
                    writer.close()
                reader = writer = None
            done = loop.time()
            if measure_from <= done <= end and ok:
                completed_in_window += 1
            if due >= measure_from:
                if ok:
                    latencies.append(done - due)
                    service.append(done - sent)
                    lags.append(sent - due)
                else:
                    errors["status" if status else "io"] += 1
        if writer is not None:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(cfg["connections"])))
    finished = loop.time()
    unsent = 0
    if rate:
        # Requests due in the window but never sent: the server fell behind the schedule (all
        # connections busy). They would have waited at least until now: count that as their
        # latency, so the percentiles are lower bounds rather than silently optimistic.
        claimed = next(counter)
        for i in range(max(claimed, math.ceil((measure_from - start) * rate)), math.ceil((end - start) * rate)):
            latencies.append(finished - (start + i / rate))
            unsent += 1
    result = _summary(latencies, errors, seconds, service=service, lags=lags)
    result["rps"] = completed_in_window / seconds
    if rate:
        result["unsent"] = unsent
    return result


async def grpc_load(cfg: dict) -> dict:
    """Closed loop: `concurrency` in-flight unary calls on one grpc.aio channel."""
    import grpc
    from persona.v1 import chat_pb2, chat_pb2_grpc

    loop = asyncio.get_running_loop()
    async with grpc.aio.insecure_channel(cfg["target"]) as channel:
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        request = chat_pb2.GetChatSessionRequest(id=cfg["id"])
        metadata = (("authorization", f"Bearer {cfg['key']}"),)
        latencies: list[float] = []
        errors = {"grpc": 0}
        measure_from = loop.time() + cfg["warmup"]
        end = measure_from + cfg["seconds"]

        async def worker() -> None:
            while (sent := loop.time()) < end:
                try:
                    await stub.GetChatSession(request, metadata=metadata, timeout=10)
                    ok = True
                except grpc.aio.AioRpcError:
                    ok = False
                if sent >= measure_from:
                    if ok:
                        latencies.append(loop.time() - sent)
                    else:
                        errors["grpc"] += 1

        await asyncio.gather(*(worker() for _ in range(cfg["concurrency"])))
    return _summary(latencies, errors, cfg["seconds"])


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


def _summary(latencies: list[float], errors: dict, seconds: float, service=None, lags=None) -> dict:
    latencies.sort()
    out = {
        "requests": len(latencies),
        "rps": len(latencies) / seconds,
        "p50_ms": _pct(latencies, 50) * 1000,
        "p90_ms": _pct(latencies, 90) * 1000,
        "p99_ms": _pct(latencies, 99) * 1000,
        "max_ms": (latencies[-1] * 1000) if latencies else float("nan"),
        "errors": sum(errors.values()),
        "error_kinds": errors,
    }
    if service:
        service.sort()
        out["service_p99_ms"] = _pct(service, 99) * 1000
    if lags:
        lags.sort()
        out["send_lag_p99_ms"] = _pct(lags, 99) * 1000
    return out


def client_main(kind: str, cfg_json: str) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    cfg = json.loads(cfg_json)
    result = asyncio.run(http_load(cfg) if kind == "http" else grpc_load(cfg))
    print("BENCH_JSON " + json.dumps(result), flush=True)


# --------------------------------------------------------------------------------------
# Processes, tools and CPU accounting.
# --------------------------------------------------------------------------------------

_children: list[subprocess.Popen] = []


def _stop_child(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc in _children:
        _children.remove(proc)


def run_tool(cmd: list[str], timeout: float) -> tuple[str, subprocess.Popen]:
    """Run a load generator; it is stopped if we are interrupted."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    _children.append(proc)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        _stop_child(proc)
    return out, proc


def bench_json_line(output: str) -> dict:
    for line in output.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON "):])
    raise RuntimeError("load generator printed no result:\n" + output[-2000:])


def ensure_apt_tool(binary: str, package: str, allow_install: bool) -> str | None:
    found = shutil.which(binary)
    if found:
        return found
    hint = f"`{binary}` is not installed: install it with `sudo apt-get update && sudo apt-get install -y {package}`"
    if allow_install and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"installing {package} (apt-get) for {binary} ...", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        ok = subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True).returncode == 0
        ok = ok and subprocess.run(["apt-get", "install", "-y", "-qq", package], env=env, capture_output=True).returncode == 0
        if ok and shutil.which(binary):
            return shutil.which(binary)
        print(f"could not install {package}. {hint}", flush=True)
    else:
        print(hint + " (falling back to the Python load generator, which competes for CPU).", flush=True)
    return None


def _importable(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def ensure_peer_packages(mode: str, allow_install: bool) -> str:
    """uvloop + httptools (a production uvicorn) and, for the async peer,
    greenlet (SQLAlchemy's asyncio support). Returns the peer mode to use."""
    wanted = ["uvloop", "httptools"] + (["greenlet"] if mode == "async" else [])
    missing = [m for m in wanted if not _importable(m)]
    if missing and allow_install:
        print(f"installing {' '.join(missing)} (pip) for the FastAPI peer ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], capture_output=True)
        missing = [m for m in missing if not _importable(m)]
    if {"uvloop", "httptools"} & set(missing):
        print(f"note: uvloop/httptools not installed; the peer runs on asyncio/h11, slower than a production "
              f"uvicorn (`{sys.executable} -m pip install uvloop httptools`).", flush=True)
    if "greenlet" in missing:
        print("note: greenlet is not installed (SQLAlchemy asyncio needs it): the peer runs in sync mode "
              f"(`{sys.executable} -m pip install greenlet`).", flush=True)
        return "sync"
    return mode


class CpuMeter:
    """CPU used by each part of the system during a run, in cores (from /proc via psutil)."""

    def __init__(self, roles: dict[int, str], parents: dict[int, str]):
        self.roles = roles  # pid -> role
        self.parents = parents  # parent pid -> role of its children (PostgreSQL backends)
        self._before: dict[int, tuple[str, float]] = {}
        self._t0 = 0.0

    def _role(self, proc) -> str | None:
        if proc.pid in self.roles:
            return self.roles[proc.pid]
        if proc.info["ppid"] in self.parents:
            return self.parents[proc.info["ppid"]]
        return None

    @staticmethod
    def _load_cpu() -> float:
        """This process plus its reaped children: the load generators (wrk, h2load and the
        Python clients are waited for before a run's meter stops)."""
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def _sample(self) -> dict[int, tuple[str, float]]:
        import psutil

        out = {}
        for proc in psutil.process_iter(["ppid", "cpu_times"]):
            times = proc.info["cpu_times"]
            if times is None:
                continue
            role = self._role(proc)
            if role:
                out[proc.pid] = (role, times.user + times.system)
        return out

    @staticmethod
    def machine_busy() -> float:
        """CPU seconds the whole machine has been busy (all processes, /proc/stat)."""
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
        return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")

    def start(self, running_client: int | None = None) -> None:
        self._before = self._sample()
        self._load0 = self._load_cpu()
        if running_client is not None:  # a client already running: only its CPU from now on counts
            try:
                import psutil

                times = psutil.Process(running_client).cpu_times()
                self._load0 += times.user + times.system
            except Exception:  # noqa: BLE001
                pass
        self._busy0 = self.machine_busy()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, float]:
        after = self._sample()
        busy = self.machine_busy() - self._busy0
        wall = time.monotonic() - self._t0
        used: dict[str, float] = {}
        for pid, (role, cpu) in after.items():
            used[role] = used.get(role, 0.0) + cpu - self._before.get(pid, (role, 0.0))[1]
        used["load generator"] = max(0.0, self._load_cpu() - self._load0)
        # Whatever else ran (other users of the machine skew the numbers).
        used["other"] = max(0.0, busy - sum(used.values()))
        return {role: round(cpu / wall, 2) for role, cpu in sorted(used.items(), key=lambda kv: -kv[1]) if cpu / wall >= 0.005}


def wait_for_quiet(max_wait: float, threshold: float = 0.15) -> float:
    """Wait (up to max_wait s) until the machine is idle apart from us; returns the busy cores seen last."""
    deadline = time.monotonic() + max_wait
    while True:
        b0, t0 = CpuMeter.machine_busy(), time.monotonic()
        time.sleep(1.0)
        busy = (CpuMeter.machine_busy() - b0) / (time.monotonic() - t0)
        if busy <= threshold or time.monotonic() >= deadline:
            return busy


# --------------------------------------------------------------------------------------
# The benchmark.
# --------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.args = args
        self.stack = None
        self.peer: subprocess.Popen | None = None
        self.peer_port = 0
        self.engine = None
        self.tmp: pathlib.Path | None = None
        self.org_id = ""
        self.results: dict[str, dict] = {}
        self.rounds: dict[str, list[dict]] = {}
        self.pg_pid = self.redis_pid = None
        self.notes: list[str] = []

    # --- setup ------------------------------------------------------------------------

    def start(self) -> None:
        from persona_service.kernel.db.engine import make_engine
        from persona_service.kernel.settings import Settings
        from persona_service.kernel.stack import Stack, free_port
        from persona_service.registry import MODULES

        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="persona-bench-"))
        settings = Settings(
            data_dir=self.tmp / "data",
            database_url=os.environ.get("DATABASE_URL", ""),
            redis_url=os.environ.get("REDIS_URL", ""),
            http_port=free_port(),
            grpc_port=free_port(),
            admin_port=free_port(),
            jwt_secret="bench-" + uuid.uuid4().hex * 2,
        )
        extra = {"PERSONA_JWT_SECRET": settings.jwt_secret}
        for item in self.args.server_env:
            name, _, value = item.partition("=")
            extra[name] = value
        ports = [settings.grpc_port] + [free_port() for _ in range(self.args.servers - 1)]
        self.stack = Stack(settings, MODULES, grpc_ports=ports, extra_env=extra)
        print(f"starting the stack in {settings.data_dir} ...", flush=True)
        self.stack.start()
        self.engine = make_engine(self.stack.database_url, pool_size=2)
        # Our own PostgreSQL and Redis processes, for the CPU breakdown (not known when external).
        self.pg_pid = self.redis_pid = None
        if not settings.database_url:
            import pgserver

            self.pg_pid = pgserver.get_server(settings.data_dir / "postgres").get_pid()
        if self.stack._redis is not None:
            self.redis_pid = self.stack._redis._client.pid
        self._seed()
        self._start_peer()

    def _seed(self) -> None:
        from persona_service.chat.tables import ChatSession
        from persona_service.config.repository import ORG_LEVEL, ConfigRepository
        from persona_service.kernel import ids
        from persona_service.orgs.keys import KeyService
        from persona_service.orgs.service import Onboarding
        from sqlalchemy import insert

        with self.engine.begin() as conn:
            made = Onboarding(conn).create_org(f"Benchmark {uuid.uuid4().hex[:8]}", plan="enterprise")
            self.org_id = made.org_id
            config = ConfigRepository(conn)
            # Enterprise limits are tuned per org: high enough never to reject.
            for name in ("requests_per_minute", "requests_per_day"):
                config.upsert(made.org_id, ORG_LEVEL, f"api.rate_limit.{name}", 1_000_000_000, "benchmark")
            _, self.key = KeyService(conn).create(
                None, org_id=made.org_id, workspace_id=made.workspace_id, user_id=made.user_id, plan="enterprise",
                name="benchmark", scopes=["chat:read"],
            )
            self.session_id = ids.new_id("chat_session")
            conn.execute(insert(ChatSession.__table__).values(
                id=self.session_id, org_id=made.org_id, workspace_id=made.workspace_id,
                persona_id=str(uuid.uuid4()), user_id="usr_benchmark", title="Benchmark session",
                message_count=12, input_tokens=3456, output_tokens=7890, cost_usd_micros=12345,
            ))
        self.path = f"/v1/chat/sessions/{self.session_id}"

    def _start_peer(self) -> None:
        from persona_service.kernel.stack import free_port

        self.peer_port = free_port()
        log = open(self.stack.log_dir / "peer.log", "ab")
        env = {
            **os.environ,
            "DATABASE_URL": self.stack.database_url,
            "REDIS_URL": self.stack.redis_url,
            "PEER_PORT": str(self.peer_port),
            "PEER_MODE": self.args.peer_mode,
            "PEER_ACCESS_LOG": "0" if self.args.peer_no_access_log else "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])),
        }
        self.peer = subprocess.Popen(
            [sys.executable, str(PEER)], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.peer.poll() is not None:
                raise RuntimeError(f"the FastAPI peer exited; see {self.stack.log_dir}/peer.log")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.peer_port}/healthz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the FastAPI peer did not start") from None
                time.sleep(0.1)
        first = (self.stack.log_dir / "peer.log").read_text().splitlines()
        self.peer_desc = next((line for line in first if line.startswith("peer:")), "peer: ?")[6:]

    def stop(self) -> None:
        if self.peer is not None:
            _stop_child(self.peer)
            self.peer = None
        for proc in list(_children):
            _stop_child(proc)
        if self.engine is not None:
            if self.org_id and os.environ.get("DATABASE_URL"):
                try:  # leave an external database as we found it
                    from sqlalchemy import text

                    with self.engine.begin() as conn:
                        conn.execute(text("DELETE FROM organizations WHERE id = :id"), {"id": self.org_id})
                except Exception as exc:  # noqa: BLE001
                    print(f"could not delete the benchmark organization {self.org_id}: {exc}")
            self.engine.dispose()
            self.engine = None
        if self.stack is not None:
            self.stack.stop()
            if not self.stack.settings.database_url:
                import pgserver

                try:
                    pgserver.get_server(self.stack.settings.data_dir / "postgres").cleanup()
                except Exception as exc:  # noqa: BLE001
                    print(f"pg_ctl stop failed ({exc}); stopping PostgreSQL directly")
                self._ensure_stopped(self.pg_pid)
            self.stack = None
        if self.tmp is not None and not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.tmp is not None:
            print(f"kept {self.tmp}")

    @staticmethod
    def _ensure_stopped(pid: int | None) -> None:
        """PostgreSQL's postmaster must be gone before its data dir is deleted."""
        if not pid:
            return
        import psutil

        try:
            proc = psutil.Process(pid)
            try:
                proc.wait(5)
                return
            except psutil.TimeoutExpired:
                proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(15)
            except psutil.TimeoutExpired:
                proc.kill()
        except psutil.Error:
            pass

    # --- checks -----------------------------------------------------------------------

    def verify(self) -> None:
        """One request on each path, and the same JSON from the stack and the peer."""
        import grpc
        from persona.v1 import chat_pb2, chat_pb2_grpc

        def get(port: int) -> dict:
            req = urllib.request.Request(f"http://127.0.0.1:{port}{self.path}", headers=self.auth_header)
            with urllib.request.urlopen(req, timeout=10) as resp:
                headers = {k.lower() for k in resp.headers.keys()}
                assert "x-ratelimit-remaining" in headers, f"no rate-limit headers from port {port}"
                return json.loads(resp.read())

        edge, peer = get(self.stack.settings.http_port), get(self.peer_port)
        if edge != peer:
            diff = {k: (edge.get(k), peer.get(k)) for k in set(edge) | set(peer) if edge.get(k) != peer.get(k)}
            self.notes.append(f"JSON of the stack and the peer differ: {diff}")
        with grpc.insecure_channel(f"127.0.0.1:{self.stack.settings.http_port}") as channel:
            reply = chat_pb2_grpc.ChatServiceStub(channel).GetChatSession(
                chat_pb2.GetChatSessionRequest(id=self.session_id), metadata=(("authorization", f"Bearer {self.key}"),),
                timeout=10,
            )
            assert reply.session_id == self.session_id

    @property
    def auth_header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    # --- load -------------------------------------------------------------------------

    def cpu_meter(self) -> CpuMeter:
        roles = {proc.pid: "gRPC server" for proc in self.stack._servers.values()} | getattr(self, "extra_roles", {})
        if self.stack._envoy is not None:
            roles[self.stack._envoy.pid] = "envoy"
        if self.peer is not None:
            roles[self.peer.pid] = "FastAPI peer"
        parents = {}
        if self.pg_pid:
            roles[self.pg_pid] = "postgres"
            parents[self.pg_pid] = "postgres"
        if self.redis_pid:
            roles[self.redis_pid] = "redis"
        return CpuMeter(roles, parents)

    def http_closed(self, name: str, port: int) -> dict:
        a = self.args
        url = f"http://127.0.0.1:{port}{self.path}"
        if self.wrk:
            script = self.tmp / "report.lua"
            script.write_text(WRK_REPORT)
            base = [self.wrk, f"-t{a.wrk_threads}", f"-c{a.concurrency}", "-H", f"Authorization: Bearer {self.key}",
                    "--timeout", "10s", "-s", str(script)]
            run_tool(base + [f"-d{max(1, round(a.warmup))}s", url], a.warmup + 30)
            meter = self.cpu_meter()
            meter.start()
            out, _ = run_tool(base + [f"-d{max(1, round(a.seconds))}s", url], a.seconds + 30)
            cpu = meter.stop()
            r = bench_json_line(out)
            seconds = r["duration_us"] / 1e6
            errors = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
            result = {
                "rps": (r["requests"] - r["status"]) / seconds, "p50_ms": r["p50_us"] / 1000,
                "p99_ms": r["p99_us"] / 1000, "errors": errors, "tool": f"wrk -t{a.wrk_threads} -c{a.concurrency}",
            }
        else:
            cfg = {"host": "127.0.0.1", "port": port, "path": self.path, "headers": self.auth_header,
                   "seconds": a.seconds, "warmup": a.warmup, "connections": a.concurrency}
            result, cpu = self._python_client("http", cfg)
            result["tool"] = f"python asyncio c={a.concurrency}"
        result["cpu"] = cpu
        self._record(name, result)
        return result

    def grpc_closed(self, name: str) -> dict:
        a = self.args
        port = self.stack.settings.http_port
        server_logs = {p: self.stack.log_dir / f"server-{p}.log" for p in self.stack.grpc_ports}
        marks = {p: f.stat().st_size for p, f in server_logs.items()}
        access = self.stack.log_dir / "access.log"
        access_mark = access.stat().st_size if access.exists() else 0
        if self.h2load:
            from persona.v1 import chat_pb2

            payload = chat_pb2.GetChatSessionRequest(id=self.session_id).SerializeToString()
            body = self.tmp / "grpc-request.bin"
            body.write_bytes(b"\x00" + len(payload).to_bytes(4, "big") + payload)
            log = self.tmp / "h2load.log"
            clients = max(1, min(a.h2_clients, a.concurrency))
            streams = max(1, a.concurrency // clients)
            cmd = [self.h2load, "-c", str(clients), "-m", str(streams), "-t", "1", "-d", str(body),
                   "-H", "content-type: application/grpc", "-H", "te: trailers",
                   "-H", f"authorization: Bearer {self.key}"]
            url = f"http://127.0.0.1:{port}{GRPC_METHOD}"
            run_tool(cmd + ["-D", str(max(1, round(a.warmup))), url], a.warmup + 30)
            marks = {p: f.stat().st_size for p, f in server_logs.items()}
            time.sleep(0.5)
            access_mark = access.stat().st_size if access.exists() else 0
            meter = self.cpu_meter()
            meter.start()
            out, _ = run_tool(cmd + ["-D", str(max(1, round(a.seconds))), "--log-file", str(log), url], a.seconds + 30)
            cpu = meter.stop()
            m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                          r"(\d+) errored, (\d+) timeout", out)
            if not m:
                raise RuntimeError("unexpected h2load output:\n" + out[-2000:])
            done, succeeded, failed, errored, timeouts = (int(m.group(i)) for i in (3, 4, 5, 6, 7))
            durations = sorted(int(line.split("\t")[2]) / 1000 for line in log.read_text().splitlines() if line.strip())
            result = {
                "rps": succeeded / a.seconds, "p50_ms": _pct(durations, 50), "p99_ms": _pct(durations, 99),
                "errors": failed + errored + timeouts, "tool": f"h2load -c{clients} -m{streams}",
            }
        else:
            cfg = {"target": f"127.0.0.1:{port}", "id": self.session_id, "key": self.key, "seconds": a.seconds,
                   "warmup": a.warmup, "concurrency": a.concurrency}
            result, cpu = self._python_client("grpc", cfg)
            result["tool"] = f"python grpc.aio c={a.concurrency}"
        # h2load sees HTTP 200 on gRPC errors: count the failures the server logged,
        # and the upstream failures Envoy flagged (they never reached the server).
        time.sleep(0.5)
        server_errors = 0
        for p, f in server_logs.items():
            with open(f, "rb") as fh:
                fh.seek(marks[p])
                for status in re.findall(rb"GetChatSession status=(\d+)", fh.read()):
                    server_errors += status != b"200"
        envoy_errors = 0
        if access.exists():
            with open(access, "rb") as fh:
                fh.seek(access_mark)
                for line in fh.read().splitlines():
                    m = re.search(rb'HTTP/2" (\d+) (\S+) ', line)
                    # DC: the load generator closed its connection at the end of the run (not an error).
                    if GRPC_METHOD.encode() in line and m and m.group(1) != b"200" and m.group(2) != b"DC":
                        envoy_errors += 1
        if self.h2load:
            result["errors"] += server_errors + envoy_errors
        result["cpu"] = cpu
        self._record(name, result)
        return result

    def paced(self, name: str, port: int, rate: float) -> dict:
        a = self.args
        cfg = {"host": "127.0.0.1", "port": port, "path": self.path, "headers": self.auth_header,
               "seconds": a.seconds, "warmup": a.warmup, "connections": a.paced_connections, "rate": rate}
        result, cpu = self._python_client("http", cfg)
        result["tool"] = f"python paced {rate:,.0f}/s, {a.paced_connections} conns"
        result["rate"] = rate
        result["cpu"] = cpu
        self._record(name, result)
        return result

    def _python_client(self, kind: str, cfg: dict) -> tuple[dict, dict]:
        cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--_client", kind, json.dumps(cfg)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True)
        _children.append(proc)
        meter = self.cpu_meter()
        try:
            # Meter the measured part only (the client warms up first).
            time.sleep(cfg["warmup"] + 0.3)
            meter.start(running_client=proc.pid)
            out, _ = proc.communicate(timeout=cfg["seconds"] + 60)
            cpu = meter.stop()
        finally:
            _stop_child(proc)
        return bench_json_line(out), cpu

    def _record(self, name: str, result: dict) -> None:
        """Keep a run's result; with --rounds, the median of the rounds (errors summed)."""
        self._print(name, result)
        self.rounds.setdefault(name, []).append(result)
        runs = self.rounds[name]
        if len(runs) == 1:
            self.results[name] = result
            return
        merged = dict(runs[-1])
        for key in ("rps", "p50_ms", "p99_ms", "python_cpu_ms", "service_cpu_ms"):
            values = [x[key] for x in runs if key in x]
            if values:
                merged[key] = statistics.median(values)
        merged["errors"] = sum(x["errors"] for x in runs)
        merged["tool"] = f"{runs[-1]['tool']}, median of {len(runs)} rounds"
        merged["cpu"] = {k: round(statistics.mean(x["cpu"].get(k, 0.0) for x in runs), 2)
                         for k in {k for x in runs for k in x.get("cpu", {})}}
        merged["cpu"] = dict(sorted(merged["cpu"].items(), key=lambda kv: -kv[1]))
        self.results[name] = merged

    @staticmethod
    def _cpu_per_request(r: dict) -> None:
        """CPU ms per request of the Python process, and of the whole service (+ Envoy, PostgreSQL,
        Redis): less sensitive than req/s to other work on the machine."""
        cpu, rps = r.get("cpu", {}), r["rps"]
        if not cpu or not rps:
            return
        python = cpu.get("gRPC server", 0.0) + cpu.get("FastAPI peer", 0.0)
        total = python + sum(cpu.get(k, 0.0) for k in ("envoy", "postgres", "redis"))
        r["python_cpu_ms"] = 1000 * python / rps
        r["service_cpu_ms"] = 1000 * total / rps

    def _print(self, name: str, r: dict) -> None:
        self._cpu_per_request(r)
        extra = ""
        if "unsent" in r:
            extra += f", {r['unsent']} due but never sent"
        if "send_lag_p99_ms" in r:
            extra += f", client send lag p99 {r['send_lag_p99_ms']:.2f} ms, service-time p99 {r['service_p99_ms']:.2f} ms"
        cpu = ", ".join(f"{k} {v:.2f}" for k, v in r.get("cpu", {}).items())
        if r.get("unsent"):
            extra += " (latencies include the unsent requests' wait so far: lower bounds)"
        per = f"; CPU per request: Python {r['python_cpu_ms']:.2f} ms, service {r['service_cpu_ms']:.2f} ms" \
            if "python_cpu_ms" in r else ""
        print(f"  {name}: {r['rps']:,.0f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
              f"errors {r['errors']} [{r['tool']}]{extra}\n    CPU (cores): {cpu}{per}", flush=True)

    def profile(self) -> None:
        """A JSON run with the gRPC server under py-spy (on-CPU samples); prints the top functions.
        py-spy cannot attach to a running process here, so the server is restarted under it."""
        spy = shutil.which("py-spy") or str(pathlib.Path(sys.executable).with_name("py-spy"))
        if not os.path.exists(spy):
            print("--profile needs py-spy (`pip install py-spy`); skipped.")
            return
        import psutil

        port = self.stack.grpc_ports[0]
        raw = self.tmp / "server-profile.txt"
        self.stack.stop_server(port)
        log = open(self.stack.log_dir / f"server-{port}.log", "ab")
        spy_proc = subprocess.Popen(
            [spy, "record", "-r", "250", "-f", "raw", "-o", str(raw), "--nonblocking", "--gil", "--",
             sys.executable, "-m", "persona_service.cli", "serve"],
            env=self.stack.process_env(PERSONA_GRPC_PORT=str(port)), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )
        _children.append(spy_proc)
        try:
            self.stack._wait_grpc(port, spy_proc)
            server_pids = [c.pid for c in psutil.Process(spy_proc.pid).children()]
            self.profiled_pids = server_pids
            self.extra_roles = {pid: "gRPC server" for pid in server_pids} | {spy_proc.pid: "py-spy"}
            self.http_closed("JSON via Envoy (under py-spy)", self.stack.settings.http_port)
        finally:
            self.extra_roles = {}
            spy_proc.send_signal(signal.SIGINT)  # py-spy writes its output and ends the server
            try:
                spy_proc.wait(30)
            finally:
                _stop_child(spy_proc)
                for pid in getattr(self, "profiled_pids", []):
                    try:
                        psutil.Process(pid).terminate()
                    except psutil.Error:
                        pass
        if not raw.exists():
            print("py-spy produced no profile (ptrace not permitted?)")
            return
        inclusive: dict[str, int] = {}
        own: dict[str, int] = {}
        total = 0
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
            total += n
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for frame in set(frames):
                inclusive[frame] = inclusive.get(frame, 0) + n
        print(f"\nserver profile ({total} samples, samples of the thread holding the GIL, py-spy --gil):")
        print("  top self time:")
        for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:15]:
            print(f"    {100 * n / total:5.1f}%  {frame}")
        print("  top inclusive (persona_service / sqlalchemy / redis / grpc frames):")
        picked = [(f, n) for f, n in inclusive.items() if re.search(r"persona_service|sqlalchemy|redis|psycopg|grpc", f)]
        for frame, n in sorted(picked, key=lambda kv: -kv[1])[:25]:
            print(f"    {100 * n / total:5.1f}%  {frame}")
        print(f"  raw stacks: {raw}" + ("" if self.args.keep else " (deleted at exit; use --keep)"))

    # --- run ------------------------------------------------------------------------

    def run(self) -> None:
        a = self.args
        runs = {r.strip() for r in a.runs.split(",") if r.strip()}
        unknown = runs - {"json", "grpc", "peer", "paced", "sustainable"}
        if unknown:
            raise SystemExit(f"unknown --runs: {', '.join(sorted(unknown))}")
        self.wrk = None if a.python_clients else ensure_apt_tool("wrk", "wrk", not a.no_install)
        self.h2load = None if a.python_clients or "grpc" not in runs else ensure_apt_tool(
            "h2load", "nghttp2-client", not a.no_install)
        a.peer_mode = ensure_peer_packages(a.peer_mode, not a.no_install)
        self.start()
        self.verify()
        http_port = self.stack.settings.http_port
        busy = wait_for_quiet(a.quiet_wait)
        if busy > 0.15:
            self.notes.append(f"the machine was not idle before the runs ({busy:.2f} cores busy with other work); "
                              "see the `other` CPU of each run")
            print(f"warning: {busy:.2f} cores busy with other processes; the numbers will be skewed", flush=True)
        print(f"\nclosed loop, {a.concurrency} in flight, {a.warmup:g} s warm-up + {a.seconds:g} s each:", flush=True)
        for round_ in range(a.rounds):
            if a.rounds > 1:
                print(f" round {round_ + 1}/{a.rounds}", flush=True)
            if "json" in runs:
                self.http_closed(JSON, http_port)
            if "grpc" in runs:
                self.grpc_closed(GRPC)
            if "peer" in runs:
                self.http_closed(PEER_NAME, self.peer_port)
        if "paced" in runs and a.rate > 0:
            print(f"\npaced (open loop) at {a.rate:,.0f} req/s, latency from the scheduled send time:", flush=True)
            self.paced(f"{JSON}, paced {a.rate:,.0f}/s", http_port, a.rate)
            if not a.no_paced_peer:
                self.paced(f"{PEER_NAME}, paced {a.rate:,.0f}/s", self.peer_port, a.rate)
        capacity = [self.results[n]["rps"] for n in (JSON, PEER_NAME) if n in self.results]
        if "sustainable" in runs and a.sustainable_fraction > 0 and capacity:
            rate = max(10, round(a.sustainable_fraction * min(capacity), -1))
            print(f"\npaced at {a.sustainable_fraction:.0%} of the lower closed-loop throughput ({rate:,.0f} req/s):",
                  flush=True)
            self.paced(f"{JSON}, paced {rate:,.0f}/s", http_port, rate)
            if not a.no_paced_peer:
                self.paced(f"{PEER_NAME}, paced {rate:,.0f}/s", self.peer_port, rate)
        if a.profile:
            self.profile()
        self.report()

    def report(self) -> None:
        a, r = self.args, self.results
        peer = r.get(PEER_NAME, {}).get("rps", 0)

        def ratio(name: str) -> str:
            return f"{r[name]['rps'] / peer:.2f}×" if peer else "n/a"

        def verdict(ok: bool) -> str:
            return "met" if ok else "**missed**"

        rows = []
        if JSON in r:
            ok = peer and r[JSON]["rps"] / peer >= TARGET_JSON_RATIO
            rows.append((f"{JSON} (closed loop)", JSON, ratio(JSON),
                         f"≥ {TARGET_JSON_RATIO:.1f}× FastAPI: {verdict(ok)}"))
        if GRPC in r:
            ok = peer and r[GRPC]["rps"] / peer >= TARGET_GRPC_RATIO
            rows.append((f"{GRPC} (closed loop)", GRPC, ratio(GRPC), f"≥ {TARGET_GRPC_RATIO:.1f}× FastAPI: {verdict(ok)}"))
        if PEER_NAME in r:
            rows.append((f"{PEER_NAME} (closed loop)", PEER_NAME, "1.00×", "baseline"))
        for name, x in r.items():
            if "rate" not in x:
                continue
            target = "reference"
            if name.startswith(JSON) and x["rate"] == a.rate:
                ok = x["p99_ms"] <= TARGET_PACED_P99_MS and x["rps"] >= 0.98 * a.rate and x["errors"] + x["unsent"] == 0
                target = f"p99 ≤ {TARGET_PACED_P99_MS:g} ms at {a.rate:,.0f}/s: {verdict(ok)}"
            rows.append((f"{name} (open loop)", name, "—", target))

        lines = [
            f"GET /v1/chat/sessions/{{id}}: API key (cached) + Redis rate limit + primary-key read; "
            f"{os.cpu_count()} cores; {a.seconds:g} s per run after {a.warmup:g} s warm-up; "
            f"closed loop at {a.concurrency} in flight.",
            "",
            "| path | req/s | p50 ms | p99 ms | errors | vs FastAPI | CPU ms/req (Python / all) | target |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for label, key, rat, target in rows:
            x = r[key]
            errors = f"{x['errors']} (+{x['unsent']} unsent)" if x.get("unsent") else str(x["errors"])
            ge = "≥ " if x.get("unsent") else ""
            cpu = f"{x['python_cpu_ms']:.2f} / {x['service_cpu_ms']:.2f}" if "python_cpu_ms" in x else "—"
            lines.append(f"| {label} | {x['rps']:,.0f} | {ge}{x['p50_ms']:.2f} | {ge}{x['p99_ms']:.2f} | {errors} | "
                         f"{rat} | {cpu} | {target} |")
        lines += [
            "",
            "Load: " + "; ".join(f"{k}: {v['tool']}" for k, v in r.items()) + ".",
            f"Server: {self.args.servers} gRPC process(es), env "
            f"{' '.join(self.args.server_env) or '(defaults)'}; peer: {self.peer_desc}, 1 uvicorn worker.",
            "CPU ms/req: CPU time of the Python process (gRPC server or peer) / of everything serving it "
            "(+ Envoy, PostgreSQL, Redis) per successful request.",
            "CPU in cores per run: " + "; ".join(
                f"{k}: " + ", ".join(f"{role} {v:.2f}" for role, v in x.get("cpu", {}).items()) for k, x in r.items()
            ) + ".",
        ]
        other = max((x.get("cpu", {}).get("other", 0.0) for x in r.values()), default=0.0)
        if other > 0.1:
            self.notes.append(f"other processes used up to {other:.2f} cores during a run; ratios are less reliable")
        print("\n## Benchmark results\n")
        print("\n".join(lines))
        for note in self.notes:
            print(f"\nNote: {note}")
        if a.json_out:
            pathlib.Path(a.json_out).write_text(json.dumps({"args": vars(a), "results": r}, indent=2, default=str))
            print(f"\nresults written to {a.json_out}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10, help="measured duration of each run (default 10)")
    p.add_argument("--warmup", type=float, default=3, help="warm-up before each run, not measured (default 3)")
    p.add_argument("--rounds", type=int, default=1,
                   help="repeat the closed-loop runs, interleaved, and report medians (default 1)")
    p.add_argument("--concurrency", type=int, default=32, help="in-flight requests of the closed-loop runs (default 32)")
    p.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (default 1: the server needs the cores)")
    p.add_argument("--h2-clients", type=int, default=4, help="h2load connections; streams = concurrency / clients")
    p.add_argument("--rate", type=float, default=1500, help="paced run rate in req/s (default 1500; 0 skips it)")
    p.add_argument("--paced-connections", type=int, default=64, help="keep-alive connections of the paced client")
    p.add_argument("--no-paced-peer", action="store_true", help="pace the JSON path only")
    p.add_argument("--sustainable-fraction", type=float, default=0.5,
                   help="also pace both at this fraction of the lower closed-loop throughput (default 0.5; 0 skips)")
    p.add_argument("--runs", default="json,grpc,peer,paced,sustainable",
                   help="which runs, comma-separated (default json,grpc,peer,paced,sustainable)")
    p.add_argument("--servers", type=int, default=1, help="gRPC server processes behind Envoy (default 1)")
    p.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra server environment, e.g. PERSONA_GRPC_WORKERS=8 (repeatable)")
    p.add_argument("--peer-mode", choices=("async", "sync"), default="async",
                   help="FastAPI peer: async (SQLAlchemy asyncio + redis.asyncio) or sync (def endpoint, thread pool)")
    p.add_argument("--peer-no-access-log", action="store_true",
                   help="turn off uvicorn's per-request log line (the server logs one per request)")
    p.add_argument("--python-clients", action="store_true", help="use the Python load generators, not wrk/h2load")
    p.add_argument("--no-install", action="store_true", help="never install wrk/h2load/uvloop/httptools")
    p.add_argument("--profile", action="store_true", help="extra JSON run with py-spy sampling the gRPC server")
    p.add_argument("--quiet-wait", type=float, default=60,
                   help="wait up to this many seconds for the machine to be idle before measuring (default 60)")
    p.add_argument("--keep", action="store_true", help="keep the temporary data dir (logs, profiles)")
    p.add_argument("--json-out", help="also write the results as JSON to this file")
    return p.parse_args(argv)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--_client":
        client_main(sys.argv[2], sys.argv[3])
        return 0
    args = parse_args()
    bench = Bench(args)

    def on_term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    try:
        bench.run()
    except KeyboardInterrupt:
        print("\ninterrupted; stopping everything ...", flush=True)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # finish the cleanup even on a second Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        bench.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
