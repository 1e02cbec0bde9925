"""The architecture's floor, for scripts/benchmark.py's `floor` run.

The service's own Envoy edge (the same rendered configuration: buffer, Lua,
transcoder, access log, health checks) in front of N grpcio sync servers
with the service's unary thread count, whose GetChatSession answers a
constant message (the real session's bytes): no pipeline, authentication,
limits, SQL or Redis. What it costs per request is what the fixed
architecture (Envoy's JSON edge + a Python gRPC server) costs before the
service does any work of its own.

    python scripts/bench_floor.py PORT STREAM_PORT ANSWER_FILE THREADS   # one floor server
"""

from __future__ import annotations

import pathlib
import secrets
import subprocess
import sys
from collections.abc import Callable
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from persona.v1 import chat_pb2, chat_pb2_grpc


class ConstantChat(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, answer: chat_pb2.ChatSession):
        self.answer = answer

    def GetChatSession(self, request, context):  # noqa: N802 - the RPC's name
        return self.answer


def serve(port: int, stream_port: int, answer: chat_pb2.ChatSession, threads: int) -> None:
    serve_chat(ConstantChat(answer), port, stream_port, threads)


def serve_chat(chat: chat_pb2_grpc.ChatServiceServicer, port: int, stream_port: int, threads: int) -> None:
    """The unary port answers the RPC with `chat`; both answer health (Envoy probes the stream port)."""
    servers = []
    for p in (port, stream_port):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads), options=[("grpc.so_reuseport", 0)])
        if p == port:
            chat_pb2_grpc.add_ChatServiceServicer_to_server(chat, server)
        probe = health.HealthServicer()
        probe.set("", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(probe, server)
        server.add_insecure_port(f"127.0.0.1:{p}")
        server.start()
        servers.append(server)
    servers[0].wait_for_termination()


class Floor:
    """N floor servers and the edge in front of them. `spawn(port, stream_port, threads, edge_secret)` starts
    one server process (default: a constant answer, `answer`)."""

    def __init__(self, n: int, answer: chat_pb2.ChatSession | None, data: pathlib.Path,
                 spawn: Callable[[int, int, int, str], subprocess.Popen] | None = None):
        from persona_service.kernel.settings import Settings
        from persona_service.process.stack import Stack, free_port
        from persona_service.registry import MODULES

        secret = secrets.token_urlsafe(32)  # the edge proves it to the servers (client addresses)
        settings = Settings(data_dir=data, http_port=free_port(), grpc_port=free_port(1000), edge_secret=secret)
        ports = [settings.grpc_port] + [free_port(1000) for _ in range(n - 1)]
        self.edge = Stack(settings, MODULES, grpc_ports=ports)
        self.edge.log_dir.mkdir(parents=True, exist_ok=True)
        if spawn is None:
            assert answer is not None
            (data / "answer.bin").write_bytes(answer.SerializeToString())
            spawn = lambda port, stream_port, threads, _secret: subprocess.Popen(  # noqa: E731
                [sys.executable, __file__, str(port), str(stream_port), str(data / "answer.bin"), str(threads)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            )
        self.servers = [spawn(port, self.edge.stream_port(port), settings.grpc_workers, secret)
                        for port in ports]
        for port, server in zip(ports, self.servers):
            self.edge.wait_grpc(port, server, also=self.edge.stream_port(port))
        self.edge.start_envoy()

    @property
    def http_port(self) -> int:
        return self.edge.settings.http_port

    def pids(self) -> dict[str, list[int]]:
        envoy = self.edge.process("envoy")
        return {"python": [s.pid for s in self.servers], "envoy": [envoy.pid] if envoy else []}

    def stop(self) -> None:
        self.edge.stop()
        for server in self.servers:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    port, stream_port, answer_file, threads = sys.argv[1:5]
    serve(int(port), int(stream_port), chat_pb2.ChatSession.FromString(pathlib.Path(answer_file).read_bytes()),
          int(threads))
