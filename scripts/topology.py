"""The deployed topology on this machine (#31), and what must hold there.

What deploy/kubernetes describes, on 127.0.0.1 ports: Debian's PostgreSQL
server, PgBouncer in transaction pooling mode in front of it, redis-server,
the migrations run once as a job, N app nodes (each a `persona-service
serve` process group with its own data dir, as separate pods: the
persona-server Deployment) that take unary calls, M stream nodes (the same
command: the persona-stream-server Deployment) that serve every server
stream, the runners (persona-runner), a webhook worker node, and one Envoy
with active gRPC health checks, balancing unary calls over the app nodes and
streams over the stream nodes (the edge configuration `up` renders for its
servers and stream servers). The object store is a directory every node
shares (S3's stand-in).

    topology.py up [--nodes N] [--stream-nodes M]   bring it up until Ctrl-C
    topology.py bench [--short]         every scenario under steady mixed load; JSON figures on stdout
    topology.py up|bench --postgres-ha  PostgreSQL behind Patroni, etcd and HAProxy (scripts/postgres_ha.py):
                                        bench: the leader's failover, a switchover and (not --short) its machine's loss
    topology.py up|bench --redis-ha     Redis as a master, a replica and three Sentinels (quorum 2), as
                                        deploy/kubernetes/redis.yaml runs it; bench adds redis_failover

Scenarios (each under load: reads, writes, open streams, webhook deliveries):
rolling restart (each node, stream node and runner drained, stopped, started
again), node loss (`kill -9` of an app node, a stream node and a runner: a
lost machine with one pod of each), PgBouncer restart, PostgreSQL restart,
and the backup/restore drill (pg_dump/pg_restore plus the object store, into
a fresh deployment with the same configuration). With --postgres-ha: the
leader's PostgreSQL killed (`kill -9`: Patroni promotes the synchronous
standby) and a planned switchover. With --redis-ha: the Redis master killed
(`kill -9`) mid-stream: the Sentinels promote the replica. docs/scaling-out.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import http.server
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis
from persona_service.kernel.settings import Settings
from persona_service.process.edge import STREAM_CLUSTER, UNARY_CLUSTER
from persona_service.process.runner import READY_FILE_ENV as RUNNER_READY_FILE_ENV
from persona_service.process.stack import Stack, StackError, envoy_command, free_port
from persona_service.registry import MODULES
from postgres_ha import PatroniCluster, patroni_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
PG_BIN = max(pathlib.Path("/usr/lib/postgresql").glob("*/bin"), default=pathlib.Path("/usr/lib/postgresql/15/bin"))
CLI = [sys.executable, "-m", "persona_service.cli"]
# PostgreSQL and PgBouncer refuse to run as root: then they run as Debian's `postgres` user.
DB_USER = "postgres" if os.geteuid() == 0 else None
# The edge probes every 0.5 s (edge/cluster.yaml.in): a draining node is out of rotation well within this.
DRAIN_SECONDS = 1.5
REDIS_SERVICE = "persona"  # the master's name the Sentinels monitor (deploy/kubernetes/redis.yaml's)
REDIS_DOWN_AFTER_MS = 1000


def log(message: str) -> None:
    print(f"[topology {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def timed(what: str):
    """Logs how long `what` took (where a run's time goes)."""
    started = time.monotonic()
    try:
        yield
    finally:
        log(f"took {time.monotonic() - started:.1f}s: {what}")


def together(*calls) -> list:
    """Runs the calls side by side (as pods start and stop); their results, in order."""
    with concurrent.futures.ThreadPoolExecutor(max(1, len(calls))) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


@dataclass
class Proc:
    """One process group (a pod's process, a database server)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: pathlib.Path
    user: str | None = None
    popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        with open(self.log_path, "ab") as out:
            self.popen = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True, user=self.user)
        return self

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """`sig` to the whole group, then wait (SIGKILL past `timeout`)."""
        if not self.running:
            return
        assert self.popen is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """`kill -9` of the whole group: no drain, no cleanup."""
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


@dataclass
class Topology:
    root: pathlib.Path
    nodes: int = 2
    # Stream servers (their own Deployment: open stream views scale apart from unary calls); two, so that a
    # stream whose server drains or dies resumes on the other.
    stream_nodes: int = 2
    runners: int = 2  # runner processes (their own Deployment: the model's work, runs, tasks)
    http_port: int = 0
    # Settings every node gets besides the topology's own (e.g. the model provider).
    extra_env: dict[str, str] = field(default_factory=dict)
    # The deployment's configuration (Kubernetes: the Secret): the same for a restored deployment,
    # or signed URLs and sealed secrets would no longer verify.
    secrets: dict[str, str] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    # What the operations did and when (a scenario's steps, to place its failed calls among them).
    steps: list[tuple[float, str]] = field(default_factory=list)
    database: str = "persona"
    # PostgreSQL as two Patroni members behind HAProxy (scripts/postgres_ha.py) instead of one server.
    postgres_ha: bool = False
    # Redis as a master, its replica and three Sentinels (quorum 2) instead of one redis-server.
    redis_ha: bool = False
    prepared: Any = None
    _reaper: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        import base64
        import secrets as tokens

        self.root.mkdir(parents=True, exist_ok=True)
        self.http_port = self.http_port or free_port()
        self.pg_port, self.bouncer_port, self.redis_port = free_port(), free_port(), free_port()
        self.node_ports = [free_port(1000) for _ in range(self.nodes)]
        self.redis_ports = {"redis-a": self.redis_port, "redis-b": free_port()}
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.stream_node_ports = [free_port(1000) for _ in range(self.stream_nodes)]
        self.secrets = self.secrets or {
            "PERSONA_JWT_SECRET": tokens.token_urlsafe(48),
            "PERSONA_SECRETS_KEY": base64.urlsafe_b64encode(tokens.token_bytes(32)).decode(),
            "PERSONA_EDGE_SECRET": tokens.token_urlsafe(32),
        }
        # The database's own directory: owned by its user, on a path that user can reach.
        self.db_dir = pathlib.Path(tempfile.mkdtemp(prefix="persona-topology-db-"))
        self.db_dir.chmod(0o755)
        if DB_USER is not None:
            shutil.chown(self.db_dir, DB_USER)
        # Every client (PgBouncer, the runners, the worker, the CLI) reaches the leader through HAProxy.
        self.cluster = PatroniCluster(self.db_dir, PG_BIN) if self.postgres_ha else None
        if self.cluster is not None:
            self.pg_port = self.cluster.primary_port
        self.objects = self.root / "objects"
        self.objects.mkdir(exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.edge = Stack(Settings(data_dir=self.root / "edge", http_port=self.http_port, http_host="127.0.0.1",
                                   edge_secret=self.secrets["PERSONA_EDGE_SECRET"]),
                          MODULES, grpc_ports=list(self.node_ports), stream_server_ports=list(self.stream_node_ports))

    def _spawn(self, proc: Proc) -> subprocess.Popen:
        """Start a process group; the reaper (process/reaper.py, as `up` uses) stops it if this script dies."""
        self.procs[proc.name] = proc.start()
        if self._reaper is None:
            self._reaper = subprocess.Popen([sys.executable, "-m", "persona_service.process.reaper", str(os.getpid()),
                                             str(self._pids_file)], start_new_session=True,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pids = [p.popen.pid for p in self.procs.values() if p.running and p.popen is not None]
        self._pids_file.write_text(json.dumps({"pids": pids}))
        assert proc.popen is not None
        return proc.popen

    @property
    def _pids_file(self) -> pathlib.Path:
        return self.root / "topology-pids.json"

    # --- addresses -----------------------------------------------------------------

    @property
    def direct_url(self) -> str:
        return f"postgresql://persona@127.0.0.1:{self.pg_port}/{self.database}"

    @property
    def pooled_url(self) -> str:
        return f"postgresql://persona@127.0.0.1:{self.bouncer_port}/{self.database}"

    @property
    def replica_env(self) -> dict[str, str]:
        """With --postgres-ha, the reads that may lag go to the standbys through HAProxy's replica port
        (docs/scaling-out.md "Reads from replicas"); the synchronous standby is the one there."""
        if self.cluster is None:
            return {}
        return {"PERSONA_DATABASE_REPLICA_URL":
                f"postgresql://persona@127.0.0.1:{self.cluster.replica_port}/{self.database}"}

    @property
    def redis_url(self) -> str:
        """With --redis-ha, the Sentinels' addresses and the master's name (process.redis_pool follows it)."""
        if self.redis_ha:
            sentinels = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
            return f"redis+sentinel://{sentinels}/{REDIS_SERVICE}/0"
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def _log(self, name: str) -> pathlib.Path:
        return self.root / "logs" / f"{name}.log"

    def step(self, what: str) -> None:
        self.steps.append((time.time(), what))

    def stop_proc(self, name: str, sig: int = signal.SIGTERM) -> None:
        """`sig` to a process group and wait for it to exit, both recorded as steps."""
        self.step(f"{name}: {signal.Signals(sig).name}")
        self.procs[name].stop(sig)
        self.step(f"{name}: exited")

    # --- the data tier ----------------------------------------------------------------

    def start_postgres(self, init: bool = True) -> None:
        if self.cluster is not None:
            return self.start_patroni()
        data = self.db_dir / "pg"
        if init:
            self._as_db_user([str(PG_BIN / "initdb"), "-D", str(data), "-U", "persona", "--auth=trust", "-E", "UTF8",
                              "--no-sync"])
        self._spawn(Proc("postgres", [
            str(PG_BIN / "postgres"), "-D", str(data), "-p", str(self.pg_port), "-k", str(self.db_dir),
            "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=64MB",
        ], dict(os.environ), self._db_log("postgres"), DB_USER))
        self._wait_postgres(self.pg_port)
        if init:
            self.create_database()

    def start_patroni(self) -> None:
        """etcd, both Patroni members side by side (one initializes the cluster, the other clones it and
        becomes its synchronous standby) and HAProxy; then the database, made through HAProxy on the leader."""
        cluster = self.cluster
        assert cluster is not None
        for path in cluster.write_configs():
            if DB_USER is not None:
                shutil.chown(path, DB_USER)
        self._spawn(Proc("etcd", cluster.etcd_argv(), patroni_env(), self._db_log("etcd"), DB_USER))
        _wait(lambda: _answers(cluster.etcd_port), "etcd")
        for name in cluster.names:
            self.start_patroni_member(name)
        self._spawn(Proc("haproxy", cluster.haproxy_argv(), dict(os.environ), self._log("haproxy")))
        _wait(cluster.synchronous, "a Patroni leader and its synchronous standby", 120)
        leader = cluster.leader()
        _wait(lambda: self.routed_to(leader), "HAProxy routing to the leader")
        self.create_database()

    def start_patroni_member(self, name: str) -> None:
        """A Patroni member (its PostgreSQL: Patroni's child, in a session of its own); its log appends."""
        assert self.cluster is not None
        self._spawn(Proc(name, self.cluster.patroni_argv(self.cluster.names.index(name)), patroni_env(),
                         self._db_log(name), DB_USER))

    def psql(self, sql: str, database: str = "postgres", port: int = 0, timeout: float = 10) -> str:
        """One query's rows (unaligned): by default to PostgreSQL (with --postgres-ha, the leader through
        HAProxy, as every client reaches it)."""
        return subprocess.run([str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(port or self.pg_port), "-U",
                               "persona", "-d", database, "-Atc", sql], check=True, capture_output=True, text=True,
                              timeout=timeout).stdout.strip()

    def pgbouncer_admin(self, command: str) -> None:
        """A command of PgBouncer's admin console (PAUSE, RESUME)."""
        self.psql(command, "pgbouncer", self.bouncer_port, timeout=30)

    def routed_to(self, member: str | None) -> bool:
        """HAProxy routes new connections to `member` alone, and through it PostgreSQL answers as the primary."""
        assert self.cluster is not None
        return self.cluster.routed() == {member} and self.psql("select pg_is_in_recovery()") == "f"

    def listeners(self) -> int:
        """Sessions LISTENing on the primary (the runners' and the webhook worker's, one each)."""
        return int(self.psql("select count(*) from pg_stat_activity where query like 'LISTEN %'"))

    def duplicated_personas(self, org_id: str) -> list[str]:
        """Personas of the organization made more than once from one write (the load's intents are unique):
        a line each (intent: ids and creation times)."""
        rows = self.psql("select intent || ': ' || string_agg(id || ' at ' || created_at, ', ') from personas "
                         f"where org_id = '{org_id}' group by intent having count(*) > 1", self.database)
        return rows.splitlines()

    def create_database(self) -> None:
        subprocess.run([str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "persona",
                        self.database], check=True)

    def hand_over_postgres(self, to: Topology) -> None:
        """The PostgreSQL server (its process and data) goes on for `to`, a deployment restored into a second
        database of it: whichever closes last stops it and removes its data."""
        to.procs["postgres"] = self.procs.pop("postgres")
        to.pg_port, to.db_dir, self.db_dir = self.pg_port, self.db_dir, to.db_dir

    def start_pgbouncer(self) -> None:
        """Transaction pooling, as docs/scaling-out.md prescribes. Debian's PgBouncer
        (1.18) does not track prepared statements (1.21+ `max_prepared_statements`),
        so the nodes run with PERSONA_DB_PREPARED_STATEMENTS=false."""
        ini = self.db_dir / "pgbouncer.ini"
        (self.db_dir / "userlist.txt").write_text('"persona" ""\n')
        ini.write_text("\n".join([
            "[databases]",
            f"{self.database} = host=127.0.0.1 port={self.pg_port} dbname={self.database} user=persona",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1", f"listen_port = {self.bouncer_port}", "unix_socket_dir =",
            "auth_type = trust", f"auth_file = {self.db_dir / 'userlist.txt'}", "admin_users = persona",
            "pool_mode = transaction", "max_client_conn = 2000", "default_pool_size = 60",
            # PostgreSQL away: a query waits for it this long (then the node answers 503 + Retry-After), and
            # PgBouncer tries to log in again every half second (its default, 15 s, would delay recovery).
            "query_wait_timeout = 10", "server_login_retry = 0.5", "server_connect_timeout = 2",
            "ignore_startup_parameters = extra_float_digits", "", ""]))
        for path in (ini, self.db_dir / "userlist.txt"):
            if DB_USER is not None:
                shutil.chown(path, DB_USER)
        self._spawn(Proc("pgbouncer", ["pgbouncer", str(ini)], dict(os.environ), self._db_log("pgbouncer"),
                         DB_USER))
        self._wait_postgres(self.bouncer_port)

    def start_redis(self) -> None:
        if self.redis_ha:
            return self.start_redis_ha()
        redis_dir = self.root / "redis"
        redis_dir.mkdir(exist_ok=True)
        self._spawn(Proc("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                   "--dir", str(redis_dir), "--save", "", "--appendonly", "no"],
                         dict(os.environ), self._log("redis")))
        _wait(lambda: _answers(self.redis_port), "redis-server")

    def start_redis_server(self, name: str, replica_of: int | None = None) -> None:
        """One of the two Redis servers (deploy/kubernetes/redis.yaml's StatefulSet: no persistence; a
        restarted one starts as a replica of the master the Sentinels name, as the pod's script does)."""
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        self._spawn(Proc(name, ["redis-server", "--port", str(self.redis_ports[name]), "--bind", "127.0.0.1",
                                "--dir", str(folder), "--save", "", "--appendonly", "no",
                                *(["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else [])],
                         dict(os.environ), self._log(name)))
        _wait(lambda: _answers(self.redis_ports[name]), name)

    def start_redis_ha(self) -> None:
        """A master, its replica and three Sentinels (quorum 2 of 3: Debian's redis-sentinel is redis-server
        in Sentinel mode). down-after 1 s here (the manifests: 5 s, against false failovers on a slow network)."""
        self.start_redis_server("redis-a")
        self.start_redis_server("redis-b", replica_of=self.redis_ports["redis-a"])
        for index, port in enumerate(self.sentinel_ports):
            name = f"sentinel-{index}"
            folder = self.root / name
            folder.mkdir(exist_ok=True)
            conf = folder / "sentinel.conf"  # the Sentinel rewrites it: a file of its own
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                            f"sentinel monitor {REDIS_SERVICE} 127.0.0.1 {self.redis_ports['redis-a']} 2\n"
                            f"sentinel down-after-milliseconds {REDIS_SERVICE} {REDIS_DOWN_AFTER_MS}\n"
                            f"sentinel failover-timeout {REDIS_SERVICE} 10000\n"
                            f"sentinel parallel-syncs {REDIS_SERVICE} 1\n")
            self._spawn(Proc(name, ["redis-server", str(conf), "--sentinel"], dict(os.environ), self._log(name)))
        # The nodes need only a master named (the configuration names it); that the Sentinels found the replica
        # and each other (a few seconds: their hellos) is waited for by redis_failover, while the nodes start.
        _wait(lambda: self.redis_master() == "redis-a", "the Sentinels")

    def _sentinel(self, port: int, *command: str) -> Any:
        with contextlib.suppress(redis.RedisError):
            return redis.Redis(port=port, socket_timeout=1, decode_responses=True).execute_command(*command)
        return None

    def redis_master(self) -> str | None:
        """The Redis server the Sentinels (a majority of them) name as the master."""
        named = [self._sentinel(port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", REDIS_SERVICE)
                 for port in self.sentinel_ports]
        ports = [int(found[1]) for found in named if found]
        for name, port in self.redis_ports.items():
            if ports.count(port) >= 2:
                return name
        return None

    def redis_replicated(self) -> bool:
        """Every Sentinel knows the master, the other two Sentinels and a replica that is up and has every write
        the master took: a failover can be elected (2 of 3) and promote it."""
        master = self.redis_master()
        if master is None:
            return False
        for port in self.sentinel_ports:
            replicas = _pairs(self._sentinel(port, "SENTINEL", "REPLICAS", REDIS_SERVICE))
            others = _pairs(self._sentinel(port, "SENTINEL", "SENTINELS", REDIS_SERVICE))
            if len(others) < 2 or not any(r.get("flags") == "slave" and r.get("master-link-status") == "ok"
                                          for r in replicas):
                return False
        with contextlib.suppress(redis.RedisError):
            info = redis.Redis(port=self.redis_ports[master], socket_timeout=1).info("replication")
            offsets = [info[k]["offset"] for k in info if k.startswith("slave") and isinstance(info[k], dict)]
            return bool(offsets) and min(offsets) >= info["master_repl_offset"]
        return False

    def day_used(self, org_id: str) -> int | None:
        """The requests counted in an organization's day window on the Redis master (the limiter's keys)."""
        master = self.redis_master() if self.redis_ha else None
        port = self.redis_ports[master] if master is not None else None
        if port is None:
            return None
        with contextlib.suppress(redis.RedisError):
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            return sum(int(client.get(key) or 0) for key in client.scan_iter(match=f"rl:{{{org_id}}}:day:*"))
        return None

    def wait_redis_replicated(self, timeout: float = 60) -> None:
        _wait(self.redis_replicated, "the Redis replica and three Sentinels that know it and each other", timeout)

    def _db_log(self, name: str) -> pathlib.Path:
        path = self.db_dir / f"{name}.log"
        path.touch()
        if DB_USER is not None:
            shutil.chown(path, DB_USER)
        return path

    def _as_db_user(self, argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True, user=DB_USER, cwd=self.db_dir)

    def _wait_postgres(self, port: int, timeout: float = 30) -> None:
        _wait(lambda: subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]).returncode
              == 0, f"PostgreSQL on {port}", timeout)

    # --- the app tier ---------------------------------------------------------------------

    def migrate(self) -> None:
        """The migration Job, once, before any node starts (straight to PostgreSQL: DDL takes session locks)."""
        result = subprocess.run([*CLI, "migrate"], env=self.env("migrate", DATABASE_URL=self.direct_url),
                                capture_output=True, text=True, cwd=ROOT)
        if result.returncode != 0:
            raise StackError(f"the migrations failed: {result.stderr[-2000:]}")

    def env(self, name: str, **extra: str) -> dict[str, str]:
        data = self.root / name
        (data / "metrics").mkdir(parents=True, exist_ok=True)
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("PERSONA_") and k != "DATABASE_URL"},
            **self.secrets,
            "DATABASE_URL": self.pooled_url, "REDIS_URL": self.redis_url,
            "PERSONA_DATA_DIR": str(data), "PROMETHEUS_MULTIPROC_DIR": str(data / "metrics"),
            "PERSONA_HTTP_HOST": "127.0.0.1", "PERSONA_HTTP_PORT": str(self.http_port),
            "PERSONA_STORAGE_DIR": str(self.objects), "PERSONA_DB_PREPARED_STATEMENTS": "false",
            "PERSONA_DRAIN_SECONDS": str(DRAIN_SECONDS), "PERSONA_WEBHOOKS_ALLOW_PRIVATE": "1",
            "PERSONA_DB_POOL_SIZE": "10", "PERSONA_STREAM_DB_POOL_SIZE": "6", "PERSONA_LIMIT_OVERRIDE_CEILING": "1000",
            **self.replica_env,
            **self.extra_env,
            **extra,
        }

    def start_node(self, index: int) -> None:
        self.step(f"node-{index}: started")
        self.wait_node(index, self.spawn_node(index))
        self.step(f"node-{index}: serving")

    def spawn_node(self, index: int) -> subprocess.Popen:
        name = f"node-{index}"
        return self._spawn(Proc(name, [*CLI, "serve"], self.env(name, PERSONA_GRPC_PORT=str(self.node_ports[index])),
                                self._log(name)))

    def wait_node(self, index: int, popen: subprocess.Popen) -> None:
        port = self.node_ports[index]
        self.edge.wait_grpc(port, popen, timeout=90, also=self.edge.stream_port(port))

    def start_stream_node(self, index: int) -> None:
        self.step(f"stream-{index}: started")
        self.wait_stream_node(index, self.spawn_stream_node(index))
        self.step(f"stream-{index}: serving")

    def spawn_stream_node(self, index: int) -> subprocess.Popen:
        """A stream server (deploy/kubernetes/stream-server.yaml): the same `serve`, its pools the other way
        round (streams and the runs it accepts; two connections for its unary port's background jobs)."""
        name = f"stream-{index}"
        return self._spawn(Proc(name, [*CLI, "serve"], self.env(
            name, PERSONA_GRPC_PORT=str(self.stream_node_ports[index]), PERSONA_DB_POOL_SIZE="2",
            PERSONA_STREAM_DB_POOL_SIZE="10"), self._log(name)))

    def wait_stream_node(self, index: int, popen: subprocess.Popen) -> None:
        port = self.stream_node_ports[index]
        self.edge.wait_grpc(self.edge.stream_port(port), popen, timeout=90)

    def start_worker(self) -> None:
        # LISTEN/NOTIFY needs a session of its own: the worker goes to PostgreSQL directly (deploy/kubernetes too).
        self._spawn(Proc("worker", [*CLI, "worker"], self.env("worker", DATABASE_URL=self.direct_url),
                         self._log("worker")))

    def start_runner(self, index: int) -> None:
        self.wait_runner(index, self.spawn_runner(index))

    def spawn_runner(self, index: int) -> subprocess.Popen:
        # LISTEN/NOTIFY needs a session of its own: runners go to PostgreSQL directly (deploy/kubernetes too).
        # Their priority as the runner Deployment sets it (their own pods: not SCHED_IDLE, no nice).
        name = f"runner-{index}"
        self._runner_ready(index).unlink(missing_ok=True)
        self.step(f"{name}: started")
        return self._spawn(Proc(name, [*CLI, "runner"], self.env(
            name, DATABASE_URL=self.direct_url, PERSONA_DB_POOL_SIZE="12", PERSONA_STREAM_DB_POOL_SIZE="20",
            PERSONA_RUNNER_PRIORITY="nice", PERSONA_RUNNER_NICE="0",
            **{RUNNER_READY_FILE_ENV: str(self._runner_ready(index))}), self._log(name)))

    def _runner_ready(self, index: int) -> pathlib.Path:
        return self.root / f"runner-{index}" / "ready"

    def wait_runner(self, index: int, popen: subprocess.Popen, timeout: float = 120) -> None:
        """Until the runner takes runs and model calls (its ready file: the runner Deployment's readiness).
        A runner that exits fails the wait at once, and either failure carries its exit status and its log's
        last lines: a bench without --dir removes the logs, and a dead runner used to be waited for 120 s and
        reported as "did not come up", as a hung one is (the backup/restore drill's unexplained failure)."""
        name = f"runner-{index}"
        deadline = time.monotonic() + timeout
        while popen.poll() is None and not self._runner_ready(index).exists():
            if time.monotonic() > deadline:
                raise StackError(f"{name} did not come up within {timeout:.0f}s (still running, no ready file); "
                                 f"its log ends:\n{self._log_tail(name)}")
            time.sleep(0.1)
        if popen.poll() is not None:
            raise StackError(f"{name} exited ({popen.returncode}) before it was ready; its log ends:\n"
                             f"{self._log_tail(name)}")
        self.step(f"{name}: ready")

    def _log_tail(self, name: str, chars: int = 4000) -> str:
        """The end of a process's log (a runner's traceback is one JSON line, a crash at import plain text)."""
        try:
            return self._log(name).read_text(errors="replace")[-chars:] or "(empty)"
        except OSError as exc:
            return f"(unreadable: {exc})"

    def restart_runners(self) -> None:
        """As the runner Deployment rolls (deploy/kubernetes/runner.yaml: readiness on the ready file, never
        below its replicas): the next runner stops only once the restarted one is ready. Stopping them back to
        back left no runner for as long as a runner takes to start (16 s on the loaded machine), and a write
        waiting for a model call then outlived its node's drain and grace: a 503 without Retry-After."""
        for index in range(self.runners):
            self.stop_proc(f"runner-{index}")  # hands its runs over to the other runners
            self.start_runner(index)

    def start_envoy(self) -> None:
        config = self.edge.write_envoy_config(str(self._log("access")))
        popen = self._spawn(Proc("envoy", envoy_command(config, self.nodes), self.edge.envoy_env(), self._log("envoy")))
        _wait(lambda: popen.poll() is None and self._envoy_ready(), "Envoy")
        self.wait_in_rotation()

    def _envoy_ready(self) -> bool:
        with contextlib.suppress(OSError):
            return self.edge.envoy_admin("/ready")[0] == 200
        return False

    def healthy_endpoints(self, cluster: str = UNARY_CLUSTER) -> int:
        """Endpoints of the cluster (the unary one: the app nodes; the stream one: the stream nodes) Envoy
        currently routes to."""
        _, body = self.edge.envoy_admin("/clusters")
        lines = body.decode().splitlines()
        return sum(1 for line in lines if line.startswith(f"{cluster}::") and line.endswith("::health_flags::healthy"))

    def wait_in_rotation(self, *clusters: str) -> None:
        """Until every node of the clusters (default: both) is in Envoy's rotation."""
        wanted = {UNARY_CLUSTER: self.nodes, STREAM_CLUSTER: self.stream_nodes}
        _wait(lambda: all(self.healthy_endpoints(c) >= wanted[c] for c in clusters or wanted),
              f"{' and '.join(clusters or wanted)} in Envoy's rotation")

    def start(self, while_nodes_start=None) -> Topology:
        """`while_nodes_start`: a call that needs the migrated database (e.g. bootstrapping an organization),
        made while the nodes start; its result in `self.prepared`."""
        try:
            with timed("PostgreSQL (initdb, start, createdb)"):
                self.start_postgres()
            with timed("PgBouncer, Redis"):
                self.start_data_services()
            self.start_app(while_nodes_start)
        except BaseException:
            self.close()
            raise
        return self

    def start_data_services(self) -> None:
        self.start_pgbouncer()
        self.start_redis()

    def start_app(self, while_nodes_start=None, migrate_first: bool = True) -> None:
        if migrate_first:
            with timed("the migrations"):
                self.migrate()
        with timed("nodes and worker up"):
            started = [self.spawn_node(index) for index in range(self.nodes)]  # side by side, as pods start
            streams = [self.spawn_stream_node(index) for index in range(self.stream_nodes)]
            self.start_worker()
            runners = [self.spawn_runner(index) for index in range(self.runners)]
            self.prepared = while_nodes_start() if while_nodes_start else None
            for index, popen in enumerate(started):
                self.wait_node(index, popen)
            for index, popen in enumerate(streams):
                self.wait_stream_node(index, popen)
            for index, popen in enumerate(runners):
                self.wait_runner(index, popen)
        with timed("Envoy up, every node in rotation"):
            self.start_envoy()
        log(f"up: {self.http_url} ({self.nodes} nodes, {self.stream_nodes} stream nodes, PgBouncer {self.bouncer_port}, "
            f"PostgreSQL {self.pg_port})")

    def stop(self) -> None:
        """The edge, then the nodes and the worker together (each drains for itself), then the data tier."""
        tiers = [["envoy"], [*(f"node-{i}" for i in range(self.nodes)), *(f"stream-{i}" for i in range(self.stream_nodes)),
                             *(f"runner-{i}" for i in range(self.runners)), "worker"],
                 ["redis", "redis-a", "redis-b", "sentinel-0", "sentinel-1", "sentinel-2"], ["pgbouncer"],
                 ["postgres", "haproxy"], [*(self.cluster.names if self.cluster else [])], ["etcd"]]
        for tier in tiers:
            together(*(functools.partial(self.procs[name].stop, signal.SIGINT if name == "postgres" else signal.SIGTERM)
                       for name in tier if name in self.procs))

    def close(self, kill: bool = False) -> None:
        """Stopped in order (each tier drains), or `kill`ed at once where nothing is measured any more."""
        if kill:
            for proc in self.procs.values():
                proc.kill()
        else:
            self.stop()
        if self.cluster is not None:  # Patroni's PostgreSQL runs in a session of its own
            for member in self.cluster.names:
                self.cluster.kill_postgres(member)
        self._pids_file.unlink(missing_ok=True)  # all stopped: nothing left for the reaper
        if self._reaper is not None:
            self._reaper.terminate()
            self._reaper.wait()
        shutil.rmtree(self.db_dir, ignore_errors=True)

    # --- operations ------------------------------------------------------------------------

    def restart_node(self, index: int) -> None:
        """A rolling step: SIGTERM (the node drains), wait for it to exit, start it, wait until Envoy routes to it."""
        self.stop_proc(f"node-{index}")
        self.start_node(index)
        self.wait_in_rotation(UNARY_CLUSTER)  # (the stream nodes roll apart, as another Deployment)
        self.step(f"node-{index}: in Envoy's rotation")

    def restart_stream_node(self, index: int) -> None:
        """The same for a stream node: its open streams end when it stops, and their clients resume on the
        other stream node with Last-Event-ID."""
        self.stop_proc(f"stream-{index}")
        self.start_stream_node(index)
        self.wait_in_rotation(STREAM_CLUSTER)
        self.step(f"stream-{index}: in Envoy's rotation")

    def restart_worker(self) -> None:
        self.stop_proc("worker")
        self.start_worker()
        self.step("worker: started")

    def backup(self, into: pathlib.Path) -> None:
        """pg_dump (custom format, consistent snapshot) and a copy of the object store."""
        into.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(PG_BIN / "pg_dump"), "-Fc", "-f", str(into / "persona.dump"), self.direct_url], check=True)
        shutil.copytree(self.objects, into / "objects", dirs_exist_ok=True)

    def restore(self, backup: pathlib.Path) -> None:
        """Into this (not started) deployment: a fresh cluster (or a fresh database of the server handed over),
        pg_restore, the objects; then the app, the migration Job alongside the nodes (the restored schema is
        the backup's, already migrated: for the same release the Job has nothing to do)."""
        with timed("restore: database, pg_restore, objects"):
            if "postgres" in self.procs:
                self.create_database()
            else:
                self.start_postgres()
            subprocess.run([str(PG_BIN / "pg_restore"), "--no-owner", "-d", self.direct_url,
                            str(backup / "persona.dump")], check=True)
            shutil.copytree(backup / "objects", self.objects, dirs_exist_ok=True)
        self.start_data_services()
        self.start_app(while_nodes_start=self.migrate, migrate_first=False)

    def bootstrap(self, plan: str = "enterprise") -> dict:
        """An organization (a platform administrator's: it builds exports on demand) and its API key."""
        result = subprocess.run([*CLI, "bootstrap", "--org-name", f"Topology {plan}", "--plan", plan,
                                 "--platform-admin"], env=self.env("cli", DATABASE_URL=self.direct_url),
                                capture_output=True, text=True, cwd=ROOT)
        if result.returncode != 0:
            raise StackError(f"bootstrap failed: {result.stderr[-2000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def raise_limits(self, org_id: str) -> None:
        """The load's organization never meets its rate limits and caps (as scripts/benchmark.py does):
        what is measured is the topology, not the limiter's refusals."""
        from persona_service.config.repository import ORG_LEVEL, ConfigRepository
        from persona_service.kernel.data.engine import make_engine

        engine = make_engine(self.direct_url, pool_size=1)
        with engine.begin() as conn:
            for name in ("requests_per_minute", "requests_per_day", "concurrent_generations", "generations_per_month",
                         "cap_multiplier", "concurrent_streams"):
                ConfigRepository(conn).upsert(org_id, ORG_LEVEL, f"api.rate_limit.{name}", 10**6, "topology")
        engine.dispose()


def _answers(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _pairs(answer: Any) -> list[dict[str, str]]:
    """A Sentinel's SENTINEL REPLICAS/SENTINELS answer as dicts (redis-py parses RESP3's maps, not RESP2's
    flat key-value lists)."""
    return [entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))
            for entry in answer or []]


def _wait(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.1)
    raise StackError(f"{what} did not come up within {timeout:.0f}s")


# --- the load -------------------------------------------------------------------------------------------------


class Receiver:
    """The webhook destination: records every delivery, answers 200."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        received = self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(self.rfile.read(int(self.headers.get("content-length", 0))).decode())
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def delivered(self, persona_ids: set[str]) -> set[str]:
        text = "\n".join(self.bodies)
        return {p for p in persona_ids if p in text}


@dataclass(frozen=True)
class Failure:
    """A call that failed, with what it takes to tell why: its request id (Envoy's access log and the
    servers' logs name it), its answer (or the client's error when none came) and when it ran."""

    started: float
    ended: float
    what: str  # read, list, write, stream
    method: str
    path: str
    request_id: str
    status: int | None  # None: no answer
    body: str


@dataclass
class Tally:
    """What the clients saw. `failed`: answers that are not 2xx and carry no Retry-After (or no answer);
    `retryable`: answers with Retry-After (a 503, a 409 `in_flight`), which the client retries after it;
    both with the time the call started."""

    requests: int = 0
    answered: float = 0.0  # when the latest call that succeeded started
    failed: list[Failure] = field(default_factory=list)
    retryable: list[tuple[float, int, float]] = field(default_factory=list)  # (started, status, ended)
    acknowledged: set[str] = field(default_factory=set)
    # The writer's acknowledged writes: (when the try that succeeded was sent, when it was answered).
    writes: list[tuple[float, float]] = field(default_factory=list)
    abandoned_writes: int = 0
    streams_started: int = 0
    streams_completed: int = 0
    streams_resumed: int = 0
    streams_failed: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Load:
    """Steady mixed load through the edge: readers, a writer, streamers (each a thread)."""

    def __init__(self, base_url: str, api_key: str, readers: int = 2, streamers: int = 2, pause: float = 0.05):
        self.base_url, self.pause = base_url, pause
        self.auth = {"Authorization": f"Bearer {api_key}"}
        self.tally = Tally()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._reader, daemon=True) for _ in range(readers)]
        self._local = threading.local()  # each thread's last answer (for its Retry-After)
        self.threads += [threading.Thread(target=self._writer, daemon=True)]
        self.threads += [threading.Thread(target=self._streamer, daemon=True) for _ in range(streamers)]
        self.streamers = streamers

    def wait_for(self, seconds: float, shown, timeout: float = 60) -> None:
        """At least `seconds`, and until `shown()` (read under the tally's lock)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            with self.tally.lock:
                if time.monotonic() - started >= seconds and shown():
                    return
            time.sleep(0.05)
        raise StackError(f"the load did not show what the scenario needs within {timeout:.0f}s: "
                         f"{self.tally.requests} requests, {len(self.tally.acknowledged)} writes acknowledged, "
                         f"{self.tally.streams_completed} of {self.tally.streams_started} streams completed")

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(90)

    def _client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.auth, timeout=60)

    def _count(self, started: float, response: httpx.Response | None, what: str, method: str, path: str,
               request_id: str, error: str = "") -> bool:
        """True when the call succeeded; an answer with Retry-After is retryable, anything else failed."""
        with self.tally.lock:
            self.tally.requests += 1
            if response is not None and response.is_success:
                self.tally.answered = max(self.tally.answered, started)
                return True
            if response is not None and "retry-after" in response.headers:
                self.tally.retryable.append((started, response.status_code, time.time()))
            else:
                self.tally.failed.append(Failure(
                    started, time.time(), what, method, path, request_id,
                    response.status_code if response is not None else None,
                    response.text[:500] if response is not None else error))
        return False

    def _call(self, client: httpx.Client, what: str, method: str, path: str, **kw) -> httpx.Response | None:
        started, request_id, error = time.time(), str(uuid.uuid4()), ""
        kw["headers"] = {**kw.get("headers", {}), "X-Request-Id": request_id}
        try:
            response: httpx.Response | None = client.request(method, path, **kw)
        except httpx.HTTPError as exc:
            response, error = None, f"{type(exc).__name__}: {exc}"
        self._local.last = response
        return response if self._count(started, response, what, method, path, request_id, error) else None

    def _wait_to_retry(self) -> None:
        """As the SDKs do: after the answer's Retry-After (at most a second here), else a moment."""
        last = getattr(self._local, "last", None)
        after = last.headers.get("retry-after", "") if last is not None else ""
        time.sleep(min(1.0, float(after)) if after.isdigit() else 0.25)

    def _reader(self) -> None:
        """A persona by id, then a list of them (a read that may lag: a replica's, with --postgres-ha), in turn."""
        with self._client() as client:
            by_id = True
            while not self.stopping.is_set():
                known = list(self.tally.acknowledged)
                if known and by_id:
                    self._call(client, "read", "GET", f"/v1/personas/{random.choice(known)}")
                else:
                    self._call(client, "list", "GET", "/v1/personas", params={"limit": 5})
                by_id = not by_id
                time.sleep(self.pause)

    def _writer(self) -> None:
        """Creates personas with an Idempotency-Key, retrying a retryable answer with the same key."""
        with self._client() as client:
            while not self.stopping.is_set():
                key, intent = str(uuid.uuid4()), f"A lighthouse keeper who counts ships, number {uuid.uuid4().hex[:8]}"
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    sent = time.time()
                    answer = self._call(client, "write", "POST", "/v1/personas", json={"intent": intent},
                                        headers={"Idempotency-Key": key})
                    if answer is not None:
                        with self.tally.lock:
                            self.tally.acknowledged.add(answer.json()["id"])
                            self.tally.writes.append((sent, time.time()))
                        break
                    self._wait_to_retry()
                else:  # not acknowledged: nothing to lose, but counted
                    with self.tally.lock:
                        self.tally.abandoned_writes += 1
                time.sleep(self.pause)

    def _streamer(self) -> None:
        with self._client() as client:
            while not self.stopping.is_set():
                self._one_stream(client)
                time.sleep(self.pause)

    def _one_stream(self, client: httpx.Client) -> None:
        """A streamed create, resumed with Last-Event-ID after any disconnect (as the SDKs do); sent again with
        its Idempotency-Key when no frame came (a 503, a node lost before it answered): the same run, not a
        second persona."""
        with self.tally.lock:
            self.tally.streams_started += 1
        intent = f"A radio operator who hums in Morse, number {uuid.uuid4().hex[:8]}"
        last_id, resumes, deadline, made, frames = "", 0, time.monotonic() + 60, None, []
        key = str(uuid.uuid4())
        while time.monotonic() < deadline:
            request_id = str(uuid.uuid4())
            headers = {"X-Request-Id": request_id, "Idempotency-Key": key,
                       **({"Last-Event-ID": last_id} if last_id else {})}
            started = time.time()
            try:
                with client.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": intent},
                                   headers=headers) as response:
                    if not self._count(started, response if response.is_success else _read(response), "stream",
                                       "POST", "/v1/personas?stream=true", request_id):
                        time.sleep(0.25)
                        continue
                    for event in _sse(response.iter_lines()):
                        last_id = event.get("id", last_id)
                        if event.get("event") == "persona":
                            made = json.loads(event["data"]).get("persona", {}).get("id")
                        if event.get("event") == "end":
                            # Acknowledged once the run ends completed (its persona frame follows the commit).
                            status = json.loads(event["data"])["status"]
                            with self.tally.lock:
                                if status == "completed" and made:
                                    self.tally.streams_completed += 1
                                    self.tally.acknowledged.add(made)
                                else:
                                    self.tally.streams_failed.append(f"ended {event['data']} after {resumes} resumes "
                                                                     f"(last frames: {frames[-2:]})")
                            return
                        frames.append(event.get("data", "")[:300])
            except httpx.HTTPError:
                pass  # a disconnect mid-stream: resume
            resumes += 1
            with self.tally.lock:
                self.tally.streams_resumed += 1
            time.sleep(0.1)
        with self.tally.lock:
            self.tally.streams_failed.append(f"no end within 60s after {resumes} resumes")


def _read(response: httpx.Response) -> httpx.Response:
    response.read()
    return response


def _sse(lines):
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        name, _, value = line.partition(": ")
        event[name] = event.get(name, "") + value


# --- scenarios --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pace:
    """How long a scenario's load runs: at least these seconds, and in any case until the load has shown
    what the scenario needs: before the disruption, every kind of call under way (reads answered, a write
    and every streamer's stream open); after it, a call started after it answered (served again). The calls
    in flight across the disruption then finish before the load stops (writes retried until acknowledged,
    streams resumed until they end): their answers are what the scenario measures. The short run keeps
    only the events."""

    steady: float  # seconds of load before the disruption
    settle: float  # seconds of load after it
    node_down: float  # how long a killed node stays down before it is restarted (from its loss)


LONG, SHORT = Pace(steady=1, settle=10, node_down=5), Pace(steady=0, settle=0, node_down=0)


@dataclass
class Scenario:
    name: str
    # When the disruption began and when the component came back (for failover / recovery).
    disrupted_at: float = 0.0
    returned_at: float = 0.0
    load: Load | None = None
    figures: dict[str, Any] = field(default_factory=dict)  # the scenario's own measurements, into its result

    def figure(self, name: str) -> None:
        """`name`: seconds from the disruption until now."""
        self.figures[name] = round(time.time() - self.disrupted_at, 2)


def run_scenario(top: Topology, tenant: dict, receiver: Receiver, name: str, action, pace: Pace) -> dict:
    load = Load(top.http_url, tenant["apiKey"])
    scenario = Scenario(name, load=load)
    top.steps.clear()
    tally = load.tally
    with timed(name), load:
        load.wait_for(pace.steady, lambda: tally.answered and tally.streams_started >= load.streamers)
        log(f"{name}: under load")
        action(scenario)
        after = time.time()
        load.wait_for(pace.settle, lambda: tally.answered >= after)
    lost = _lost_writes(top, load)
    duplicated = top.duplicated_personas(tenant["orgId"])
    deadline = time.monotonic() + 30
    while receiver.delivered(tally.acknowledged) != tally.acknowledged and time.monotonic() < deadline:
        time.sleep(0.1)
    after = [t for t in [*(f.started for f in tally.failed), *(t for t, _, _ in tally.retryable)]
             if t >= scenario.disrupted_at]
    retryable: dict[str, int] = {}
    for _, status, _ in tally.retryable:
        retryable[str(status)] = retryable.get(str(status), 0) + 1
    result = {
        "scenario": name,
        "requests": tally.requests,
        "failed": len(tally.failed),
        "retryable_by_status": retryable,
        "writes_acknowledged": len(tally.acknowledged),
        "writes_abandoned": tally.abandoned_writes,
        "writes_lost": len(lost),
        "writes_duplicated": duplicated,
        **_writes_back(tally.writes, scenario.disrupted_at),
        "streams_started": tally.streams_started,
        "streams_completed": tally.streams_completed,
        "streams_resumed": tally.streams_resumed,
        "streams_not_completed": tally.streams_failed,
        "webhooks_missing": len(tally.acknowledged - receiver.delivered(tally.acknowledged)),
        # The last call after the disruption that did not succeed, from the disruption (failover) or from the
        # component's return (recovery).
        "failover_seconds": round(max(after) - scenario.disrupted_at, 2) if after else 0.0,
        # When the last call that did not succeed ended, from the disruption (one in flight at the disruption
        # counts too: what a client waited for).
        "failures_end_seconds": round(max([0.0, *(e - scenario.disrupted_at for e in [
            *(f.ended for f in tally.failed), *(e for _, _, e in tally.retryable)])]), 2),
        "recovery_seconds": (round(max(0.0, max(after) - scenario.returned_at), 2) if after else 0.0)
        if scenario.returned_at else None,
        # Each failed call, placed among the scenario's steps (seconds from the disruption), with what the
        # edge and the processes logged about it.
        "failures": [_explained(top, failure, scenario.disrupted_at) for failure in tally.failed],
        "steps": [[round(t - scenario.disrupted_at, 2), what] for t, what in top.steps],
        **scenario.figures,
    }
    log(f"{name}: {json.dumps(result)}")
    return result


def _writes_back(writes: list[tuple[float, float]], since: float) -> dict[str, float | None]:
    """When writes succeeded again: the first write sent after the disruption that was acknowledged, from the
    disruption to its answer (so it includes one write's own time: a create makes model calls), and the
    median write's time, to tell the two apart."""
    after = [answered for sent, answered in writes if sent >= since]
    return {"writes_back_seconds": round(min(after) - since, 2) if after else None,
            "write_seconds": round(statistics.median(b - a for a, b in writes), 2) if writes else None}


def _explained(top: Topology, failure: Failure, origin: float) -> dict:
    """A failed call as the report shows it: when it ran from `origin` (the disruption), the last step
    before it started, and every log line (Envoy's access log, the processes') naming its request id."""
    before = [what for t, what in top.steps if t <= failure.started]
    logs = []
    for path in sorted((top.root / "logs").glob("*.log")):
        with contextlib.suppress(OSError):
            logs += [f"{path.stem}: {line[:600]}" for line in path.read_text(errors="replace").splitlines()
                     if failure.request_id in line]
    return {"call": f"{failure.what}: {failure.method} {failure.path}", "status": failure.status,
            "body": failure.body, "started_s": round(failure.started - origin, 2),
            "ended_s": round(failure.ended - origin, 2), "after_step": before[-1] if before else "(none yet)",
            "request_id": failure.request_id, "logs": logs}


def describe_failures(result: dict) -> str:
    """A scenario's failed calls and steps, one a line (the test's assertion message)."""
    lines = [f"{result['scenario']}: {result['failed']} of {result['requests']} calls failed"]
    for f in result.get("failures", []):
        lines.append(f"- {f['call']} -> {f['status'] or 'no answer'} {f['body']!r}, from {f['started_s']} s to "
                     f"{f['ended_s']} s (after {f['after_step']!r}), request id {f['request_id']}")
        lines += [f"    {line}" for line in f["logs"]]
    lines.append("steps (seconds from the disruption): " + "; ".join(f"{t} {what}" for t, what in result["steps"]))
    return "\n".join(lines)


def _lost_writes(top: Topology, load: Load) -> list[str]:
    """Acknowledged writes that cannot be read back (through the edge, after the scenario)."""
    with httpx.Client(base_url=top.http_url, headers=load.auth, timeout=30) as client, \
            concurrent.futures.ThreadPoolExecutor(4) as pool:
        return [p for p, answer in zip(load.tally.acknowledged,
                                       pool.map(lambda p: client.get(f"/v1/personas/{p}"), load.tally.acknowledged))
                if answer.status_code != 200]


def rolling_restart(top: Topology):
    def nodes() -> None:
        for index in range(top.nodes):
            log(f"rolling restart: node-{index}")
            top.restart_node(index)

    def stream_nodes() -> None:
        for index in range(top.stream_nodes):
            log(f"rolling restart: stream-{index}")
            top.restart_stream_node(index)

    def act(scenario: Scenario) -> None:
        scenario.disrupted_at = time.time()
        # Every Deployment rolls at once, each one pod at a time.
        together(nodes, stream_nodes, top.restart_worker, top.restart_runners)
    return act


def node_loss(top: Topology, down: float, restart: bool = True):
    def act(scenario: Scenario) -> None:
        scenario.disrupted_at = time.time()
        # A lost machine: one pod of each kind. The killed stream node's streams resume on the other.
        for name in ("node-0", "stream-0", "runner-0"):  # the runner's runs: taken over when their leases run out
            top.procs[name].kill()
        top.step("node-0, stream-0, runner-0: killed")
        # Out of Envoy's rotation first (what failover is), then down for the rest of `down`.
        _wait(lambda: top.healthy_endpoints() < top.nodes and top.healthy_endpoints(STREAM_CLUSTER) < top.stream_nodes,
              "the lost nodes out of Envoy's rotation", 30)
        top.step("node-0, stream-0: out of Envoy's rotation")
        time.sleep(max(0.0, scenario.disrupted_at + down - time.time()))
        if restart:  # as Kubernetes restarts the pods
            together(functools.partial(top.start_runner, 0), functools.partial(top.start_node, 0),
                     functools.partial(top.start_stream_node, 0))
            top.wait_in_rotation()
            top.step("node-0, stream-0: in Envoy's rotation")
    return act


def restart_of(top: Topology, name: str, down: float):
    def act(scenario: Scenario) -> None:
        scenario.disrupted_at = time.time()
        top.stop_proc(name, signal.SIGINT if name == "postgres" else signal.SIGTERM)
        time.sleep(down)
        (top.start_postgres(init=False) if name == "postgres" else top.start_pgbouncer())
        scenario.returned_at = time.time()
        top.step(f"{name}: back")
    return act


def postgres_failover(top: Topology):
    """`kill -9` of the leader's postmaster: Patroni (primary_start_timeout 0) promotes the synchronous standby
    at its next loop instead of restarting the old primary, which rejoins as the standby (pg_rewind)."""
    def act(scenario: Scenario) -> None:
        cluster = _synchronous_cluster(top)
        old = cluster.leader()
        assert old is not None
        scenario.disrupted_at = time.time()
        cluster.kill_postgres(old)
        top.step(f"{old}: postgres killed (kill -9)")
        _switched(top, scenario, old)
    return act


def postgres_switchover(top: Topology):
    """A planned switchover (Patroni's REST API, as `patronictl switchover`): the leader stops, the synchronous
    standby is promoted, the old leader follows it. PgBouncer is paused around it (its transactions finish, its
    server connections close, new ones wait), so the app's queries wait out the switch instead of meeting a
    stopping primary; the runners and the worker (straight to HAProxy) ride it out as a database restart."""
    def act(scenario: Scenario) -> None:
        cluster = _synchronous_cluster(top)
        old = cluster.leader()
        new = next(name for name in cluster.names if name != old)
        scenario.disrupted_at = time.time()
        top.pgbouncer_admin("PAUSE")
        top.step("PgBouncer: paused")
        try:
            cluster.switchover(new)
            top.step(f"{old}: switchover done (Patroni's answer)")
            _wait(lambda: top.routed_to(new), "HAProxy routing to the new leader")
        finally:
            top.pgbouncer_admin("RESUME")
            top.step("PgBouncer: resumed")
        _switched(top, scenario, old)
    return act


def postgres_node_loss(top: Topology):
    """The leader's machine lost: `kill -9` of its Patroni and its PostgreSQL together. Nothing releases the
    leader lock: the standby takes it once it expires (the TTL, 10 s). The member is started again once another
    leads (as its pod would be restarted) and rejoins as the standby."""
    def act(scenario: Scenario) -> None:
        cluster = _synchronous_cluster(top)
        old = cluster.leader()
        assert old is not None
        scenario.disrupted_at = time.time()
        top.procs[old].kill()
        cluster.kill_postgres(old)
        top.step(f"{old}: Patroni and postgres killed (kill -9)")
        _switched(top, scenario, old, after_promotion=functools.partial(top.start_patroni_member, old))
    return act


def _refusal(response: httpx.Response) -> str:
    """`<status> <error code>`: what a limit answered."""
    code = response.json().get("error", {}).get("code", "") if response.content else ""
    return f"{response.status_code} {code}".strip()


def _used_up_limits(top: Topology) -> Callable[[], dict[str, Any]]:
    """Two organizations of their own (the load's limits are lifted): one whose day of requests is used up (3),
    one whose month's generations are (1), each refused once here; what each answers when asked again (one
    request each: a window that was lost would count from 0 again, and a second request would be admitted
    toward a refusal of its own). A day window lives in Redis alone (replicated to the replica promoted); a
    quota counter the new master lacks is rebuilt from PostgreSQL's record."""
    capped, quota = top.bootstrap(), top.bootstrap()

    def client(tenant: dict) -> httpx.Client:
        return httpx.Client(base_url=top.http_url, headers={"Authorization": f"Bearer {tenant['apiKey']}"}, timeout=60)

    org = f"/v1/orgs/{capped['orgId']}"
    with client(capped) as http:
        _ok(http.put("/v1/config/api.rate_limit.requests_per_day", json={"value": 3, "level": "org"}))
        # The PUT was admitted from a node's lease, whose unused units go back within a second: until then the
        # window reads full. Used up: refused, with exactly the limit counted in the master's window.
        _wait(lambda: http.get(org).status_code == 429 and top.day_used(capped["orgId"]) == 3,
              "a day's requests used up", 30)
    with client(quota) as http:
        _ok(http.put("/v1/config/api.rate_limit.generations_per_month", json={"value": 1, "level": "org"}))
        _ok(http.post("/v1/personas", json={"intent": "A patient bell ringer"}))
        refused = _refusal(http.post("/v1/personas", json={"intent": "A second one"}))
        if refused != "429 quota_exceeded":
            raise StackError(f"the monthly quota was not used up: {refused}")

    def again() -> dict[str, Any]:
        used = top.day_used(capped["orgId"])  # (before the request below, which a lost window would count)
        with client(capped) as day, client(quota) as month:
            return {"requests_per_day": _refusal(day.get(org)), "day_window_on_the_new_master": used,
                    "generations_per_month": _refusal(month.post("/v1/personas", json={"intent": "A third one"}))}
    return again


def redis_failover(top: Topology, short: bool):
    """`kill -9` of the Redis master with streams open: the Sentinels (2 of 3 agree it is down after 1 s) elect
    one of them, which promotes the replica; every node, runner and the worker follow it through the Sentinels
    (process.redis_pool). Limits used up before the kill still refuse after it (`limits_after`). The killed
    server is started again as the new master's replica (its pod restarted); the long run waits until it has
    caught up (the next round's failover needs it)."""
    def act(scenario: Scenario) -> None:
        load = scenario.load
        assert top.redis_ha and load is not None, "--redis-ha"
        limits = _used_up_limits(top)  # (before the wait: their keys are on the replica at the kill)
        top.wait_redis_replicated()
        old = top.redis_master()
        assert old is not None
        # Mid-stream: the streamers run back to back, so streams are open at the kill (counted).
        with load.tally.lock:
            tally = load.tally
            scenario.figures["streams_open_at_kill"] = (tally.streams_started - tally.streams_completed
                                                        - len(tally.streams_failed))
            scenario.disrupted_at = time.time()
        top.procs[old].kill()
        top.step(f"{old}: killed (kill -9), the Redis master")
        _wait(lambda: top.redis_master() not in (None, old), "the Sentinels' new Redis master", 60)
        new = top.redis_master()
        scenario.figure("promoted_seconds")
        top.step(f"{new}: the Redis master")
        # The limiter reaches Redis again: its headers are back (while it cannot, it fails open and sends none).
        with httpx.Client(base_url=top.http_url, headers=load.auth, timeout=30) as client:
            _wait(lambda: "x-ratelimit-limit" in client.get("/v1/personas", params={"limit": 1}).headers,
                  "the rate limiter's headers", 60)
            scenario.figure("limiter_back_seconds")
            # On every app node (Envoy takes turns): then a 200 from the used-up limits is a lost window.
            _wait(lambda: all("x-ratelimit-limit" in client.get("/v1/personas", params={"limit": 1}).headers
                              for _ in range(2 * top.nodes)), "the rate limiter's headers from every node", 60)
        scenario.figures["limits_after"] = limits()
        with load.tally.lock:
            started = load.tally.streams_started
        # More completed than had started by now (one that started after the promotion completed), and a write
        # sent after the kill acknowledged.
        load.wait_for(0, lambda: load.tally.streams_completed > started
                      and any(sent >= scenario.disrupted_at for sent, _ in load.tally.writes))
        scenario.figure("generation_after_seconds")
        top.start_redis_server(old, replica_of=top.redis_ports[new])
        top.step(f"{old}: started again, a replica of {new}")
        if not short:
            top.wait_redis_replicated()
            scenario.figure("rejoined_seconds")
            top.step(f"{old}: caught up, known to the Sentinels")
    return act


def _synchronous_cluster(top: Topology) -> PatroniCluster:
    assert top.cluster is not None, "--postgres-ha"
    _wait(top.cluster.synchronous, "a Patroni leader and its synchronous standby", 120)
    return top.cluster


def _switched(top: Topology, scenario: Scenario, old: str, after_promotion=lambda: None) -> None:
    """Each stage of a change of leader, as a figure (seconds from the disruption): another member leads
    (promoted), HAProxy routes to it (routed), the runners and the webhook worker LISTEN on it again, without
    a restart (listening), a generation that started after that completed, and the old leader is back as the
    synchronous standby (rejoined). `after_promotion`: called once another member leads (e.g. the lost
    member started again: before, it could take its own lock back)."""
    cluster, load = top.cluster, scenario.load
    assert cluster is not None and load is not None
    consumers = {name: proc.popen.pid for name, proc in top.procs.items()
                 if name.startswith("runner-") or name == "worker" if proc.popen is not None}
    _wait(lambda: cluster.leader() not in (None, old), "a new Patroni leader", 120)
    new = cluster.leader()
    scenario.figure("promoted_seconds")
    top.step(f"{new}: leader")
    after_promotion()
    _wait(lambda: top.routed_to(new), "HAProxy routing to the new leader")
    scenario.figure("routed_seconds")
    top.step(f"HAProxy: routes to {new}")
    _wait(lambda: top.listeners() >= len(consumers), "the runners' and the worker's LISTEN on the new leader")
    scenario.figure("listening_seconds")
    scenario.figures["consumers_restarted"] = [name for name, pid in consumers.items()
                                               if not top.procs[name].running or top.procs[name].popen.pid != pid]
    with load.tally.lock:
        started = load.tally.streams_started
    # More completed than had started by now: one that started after the failover completed.
    load.wait_for(0, lambda: load.tally.streams_completed > started)
    scenario.figure("generation_after_seconds")
    _wait(cluster.synchronous, "the old leader back as the synchronous standby", 120)
    scenario.figure("rejoined_seconds")
    top.step(f"{old}: synchronous standby")
    scenario.figures["replica_reads"] = replica_reads(top)


def replica_reads(top: Topology) -> dict[str, int]:
    """The reads that may lag since the deployment started, by where they ran and why ("replica/served",
    "primary/behind", "primary/out", "primary/down"): persona_replica_reads_total over every node's metrics."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    counts: dict[str, int] = {}
    for metrics in top.root.glob("*/metrics"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(metrics))
        for family in registry.collect():
            for sample in family.samples:
                if sample.name == "persona_replica_reads_total":
                    where = f"{sample.labels['target']}/{sample.labels['reason']}"
                    counts[where] = counts.get(where, 0) + int(sample.value)
    return counts


def backup_restore(top: Topology, work: pathlib.Path, nodes: int, tenant: dict,
                   same_server: bool) -> tuple[Topology, dict]:
    """The drill: resources whose bytes live in the object store, a backup, the deployment gone, a fresh
    one restored from the backup with the same configuration; every resource and signed URL checked.
    `tenant`: a free organization (bootstrapped with the deployment), upgraded here (its invoice and PDF),
    administering its own export's build. `same_server`: restored into a second database of the deployment's
    PostgreSQL server (the short run's), not into a fresh cluster."""
    auth = {"Authorization": f"Bearer {tenant['apiKey']}"}
    with httpx.Client(base_url=top.http_url, headers=auth, timeout=60) as client:
        persona = _ok(client.post("/v1/personas", json={"intent": "A restorer of old maps who hums"}))
        portrait = _ok(client.post(f"/v1/personas/{persona['id']}/portraits", json={"prompt": "in a blue coat"}))
        _ok(client.post("/v1/billing/subscription/change", json={"plan": "pro"}))
        invoice = _ok(client.get("/v1/billing/invoices"))["items"][0]
        _ok(client.post("/v1/privacy/exports", json={}))
        _wait(lambda: _ok(client.post("/v1/admin/dsar/build-one", json={}))["handled"] is False
              and _ok(client.get("/v1/privacy/exports"))["items"][0]["status"] == "completed", "the export", 60)
        export = _ok(client.get("/v1/privacy/exports"))["items"][0]
        before = {"portrait": httpx.get(portrait["signedUrl"]).content, "export": httpx.get(export["downloadUrl"]).content,
                  "invoice": httpx.get(_pdf_url(client, invoice["invoiceId"])).content}
    backup = work / "backup"
    started = time.time()
    with timed("backup"):
        top.backup(backup)
    log(f"backup: {sum(f.stat().st_size for f in backup.rglob('*') if f.is_file())} bytes")
    restored = Topology(work / "restored", nodes=nodes, stream_nodes=nodes, http_port=top.http_port, secrets=top.secrets,
                        extra_env=top.extra_env, database="persona_restored")
    try:
        if same_server:  # a second database on the same PostgreSQL server, not a second cluster
            top.hand_over_postgres(restored)
        with timed("the deployment gone"):
            top.close(kill=True)
        restored.restore(backup)
        return restored, _restored_checks(restored, auth, persona, portrait, invoice, export, before,
                                          round(time.time() - started, 1))
    except BaseException:
        restored.close()
        raise


def _restored_checks(restored: Topology, auth: dict, persona: dict, portrait: dict, invoice: dict, export: dict,
                     before: dict, seconds: float) -> dict:
    checks = {}
    with httpx.Client(base_url=restored.http_url, headers=auth, timeout=60) as client:
        checks["persona"] = client.get(f"/v1/personas/{persona['id']}").status_code == 200
        again = client.get(f"/v1/personas/{persona['id']}/portraits/{portrait['id']}")
        checks["portrait"] = again.status_code == 200
        # Signed before the backup, still valid: the same bytes from the restored deployment.
        checks["portrait_signed_url"] = httpx.get(portrait["signedUrl"]).content == before["portrait"]
        checks["export_signed_url"] = httpx.get(export["downloadUrl"]).content == before["export"]
        checks["invoice"] = client.get(f"/v1/billing/invoices/{invoice['invoiceId']}").status_code == 200
        checks["invoice_pdf"] = httpx.get(_pdf_url(client, invoice["invoiceId"])).content == before["invoice"]
        checks["export_listed"] = client.get("/v1/privacy/exports").json()["items"][0]["id"] == export["id"]
    result = {"scenario": "backup_restore", "backup_to_serving_seconds": seconds, "checks": checks,
              "all_resolved": all(checks.values())}
    log(f"backup_restore: {json.dumps(result)}")
    return result


def _pdf_url(client: httpx.Client, invoice_id: str) -> str:
    answer = client.get(f"/v1/billing/invoices/{invoice_id}/pdf", follow_redirects=False)
    assert answer.status_code == 307, answer.text
    return answer.headers["location"]


def _ok(response: httpx.Response) -> dict:
    if not response.is_success:
        raise RuntimeError(f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}")
    return response.json()


def slow_model(step_seconds: float):
    """An OpenAI-compatible model (the tests' stub, answering as the local provider) that takes
    `step_seconds` per call: a generation's stream then stays open across a drain or a node's loss."""
    sys.path.insert(0, str(ROOT / "tests"))
    from providers.openai_stub import OpenAIStub

    stub = OpenAIStub().start()
    stub.inject_delay(times=10**9, seconds=step_seconds)
    return stub


def scenarios_of(top: Topology, args: argparse.Namespace, pace: Pace) -> list[tuple[str, Any]]:
    """A round's scenarios: with --postgres-ha the leader's loss and a switchover (the single server's
    restarts do not apply), else the nodes' and the single data tier's."""
    if args.postgres_ha:  # (the short run leaves out the machine's loss: it waits out the TTL)
        return [("postgres_failover", postgres_failover(top)), ("postgres_switchover", postgres_switchover(top)),
                *([] if args.short else [("postgres_node_loss", postgres_node_loss(top))])]
    return [("rolling_restart", rolling_restart(top)),
            ("pgbouncer_restart", restart_of(top, "pgbouncer", 1)),
            ("postgres_restart", restart_of(top, "postgres", 2)),
            *([("redis_failover", redis_failover(top, args.short))] if args.redis_ha else []),
            # The short run's last: the node stays down (Kubernetes would restart it).
            ("node_loss", node_loss(top, pace.node_down, restart=not args.short))]


def bench(args: argparse.Namespace) -> dict:
    work = pathlib.Path(args.dir or tempfile.mkdtemp(prefix="persona-topology-"))
    pace = SHORT if args.short else LONG
    model = slow_model(args.step_seconds)
    # The short run's runs are taken over 5 s after their node's loss, not 10 (renewed every 1.7 s).
    lease = {"PERSONA_RUN_LEASE_SECONDS": "5"} if args.short else {}
    top = Topology(work / "deployment", nodes=args.nodes, stream_nodes=args.stream_nodes,
                   extra_env={**model.stack_env(), **lease}, postgres_ha=args.postgres_ha, redis_ha=args.redis_ha)
    # The load's organization and the drill's, bootstrapped while the nodes start.
    with timed("bring-up"):
        top.start(lambda: together(top.bootstrap, functools.partial(top.bootstrap, plan="free")))
    tenant, drill_tenant = top.prepared
    receiver = Receiver()
    results = []
    try:
        top.raise_limits(tenant["orgId"])
        with httpx.Client(base_url=top.http_url, headers={"Authorization": f"Bearer {tenant['apiKey']}"}) as client:
            _ok(client.post("/v1/webhooks", json={"url": receiver.url, "events": ["persona.created"]}))
        for _ in range(args.rounds or (1 if args.short else 3)):
            for name, action in scenarios_of(top, args, pace):
                if not args.only or name in args.only:
                    results.append(run_scenario(top, tenant, receiver, name, action, pace))
        if args.postgres_ha or (args.only and "backup_restore" not in args.only):
            return {"nodes": args.nodes, "short": args.short, "step_seconds": args.step_seconds,
                    "postgres_ha": args.postgres_ha, "redis_ha": args.redis_ha, "results": results}
        # The short run restores into one node and a second database of the same server (what is checked is
        # the data, not the balancing or initdb).
        with timed("backup_restore"):
            top, drill = backup_restore(top, work, nodes=1 if args.short else args.nodes, tenant=drill_tenant,
                                        same_server=args.short)
        results.append(drill)
    finally:
        with timed("stopped"):
            top.close(kill=True)  # the figures are taken: nothing to drain for
            receiver.server.shutdown()
            model.stop()
            if not args.dir:
                shutil.rmtree(work, ignore_errors=True)
    return {"nodes": args.nodes, "short": args.short, "step_seconds": args.step_seconds, "redis_ha": args.redis_ha,
            "results": results}


def markdown(report: dict) -> str:
    """The figures per scenario, summed over the rounds (worst times), as docs/scaling-out.md's table."""
    rows = ["| scenario | requests | failed | answered with Retry-After | writes acknowledged / lost | "
            "streams completed / started (resumed) | webhooks missing | failover / recovery |",
            "|---|---|---|---|---|---|---|---|"]
    by_name: dict[str, list[dict]] = {}
    for result in report["results"]:
        by_name.setdefault(result["scenario"], []).append(result)
    for name, runs in by_name.items():
        if name == "backup_restore":
            (drill,) = runs
            rows.append(f"| backup/restore drill | | | | | | | {'every check passed' if drill['all_resolved'] else drill['checks']}"
                        f" ({drill['backup_to_serving_seconds']} s from backup to serving) |")
            continue
        total = {k: sum(r[k] for r in runs) for k in ("requests", "failed", "writes_acknowledged", "writes_lost",
                                                      "streams_completed", "streams_started", "streams_resumed",
                                                      "webhooks_missing")}
        retryable: dict[str, int] = {}
        for r in runs:
            for status, n in r["retryable_by_status"].items():
                retryable[status] = retryable.get(status, 0) + n
        times = (f"{max(r['failover_seconds'] for r in runs)} s" if runs[0]["recovery_seconds"] is None
                 else f"back within {max(r['recovery_seconds'] for r in runs)} s")
        if "promoted_seconds" in runs[0]:  # a change of PostgreSQL's leader or Redis's master: its stages, worst
            times += "; " + ", ".join(f"{stage} {max(r[f'{stage}_seconds'] or 0.0 for r in runs)} s" for stage in (
                "promoted", "routed", "listening", "limiter_back", "generation_after", "rejoined", "writes_back")
                if f"{stage}_seconds" in runs[0])
        rows.append(f"| {name.replace('_', ' ')} (×{len(runs)}) | {total['requests']} | {total['failed']} | "
                    f"{', '.join(f'{n}× {s}' for s, n in sorted(retryable.items())) or '0'} | "
                    f"{total['writes_acknowledged']} / {total['writes_lost']} | {total['streams_completed']} / "
                    f"{total['streams_started']} ({total['streams_resumed']}) | {total['webhooks_missing']} | {times} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="bring the topology up until Ctrl-C")
    run = sub.add_parser("bench", help="every scenario under load; JSON figures on stdout")
    for p in (up, run):
        p.add_argument("--nodes", type=int, default=2, help="app nodes (unary calls)")
        p.add_argument("--stream-nodes", type=int, default=2, help="stream nodes (server streams)")
        p.add_argument("--dir", help="where its data go (default: a temporary directory, removed afterwards)")
        p.add_argument("--postgres-ha", action="store_true",
                       help="PostgreSQL as two Patroni members (etcd, synchronous standby) behind HAProxy")
        p.add_argument("--redis-ha", action="store_true",
                       help="Redis as a master, a replica and three Sentinels (bench: adds redis_failover)")
    run.add_argument("--short", action="store_true", help="one quick round (the test suite's run)")
    run.add_argument("--rounds", type=int, help="rounds of the four load scenarios (default: 1 with --short, else 3)")
    run.add_argument("--only", action="append", metavar="SCENARIO",
                     help="run only this scenario (repeatable; e.g. --only rolling_restart --rounds 5 to hunt a flake)")
    run.add_argument("--step-seconds", type=float, default=0.5,
                     help="the model's time per call (a generation makes several): how long streams stay open")
    args = parser.parse_args(argv)
    if args.command == "bench":
        report = bench(args)
        print(json.dumps(report, indent=2))
        log("figures:\n" + markdown(report))
        return 0
    top = Topology(pathlib.Path(args.dir or tempfile.mkdtemp(prefix="persona-topology-")), nodes=args.nodes,
                   stream_nodes=args.stream_nodes, postgres_ha=args.postgres_ha, redis_ha=args.redis_ha).start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"{top.http_url}  (Ctrl-C stops it)", flush=True)
    stop.wait()
    top.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
