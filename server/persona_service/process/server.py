"""The gRPC server process: persona.v1 services, health and reflection."""

from __future__ import annotations

import gc
import logging
import signal
import time
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from persona_service.kernel import logs, metrics, tracing
from persona_service.kernel import settings as config
from persona_service.kernel.module import Modules
from persona_service.kernel.transport.fair import FairExecutor
from persona_service.kernel.transport.limits.plans import ENDPOINT_CAPS
from persona_service.kernel.transport.pipeline import RequestPipeline
from persona_service.kernel.transport.policy import check_caps, find_services, method_table
from persona_service.process.app import App
from persona_service.process.edge import EDGE_HEADERS_KB

log = logging.getLogger(__name__)

# Above anything the edge forwards: a request's headers (EDGE_HEADERS_KB at
# most, its URL included), the transcoder's copy of the URL
# (`x-envoy-original-path`) and the few headers the edge adds. gRPC's own
# default (8 KiB) refused bigger ones as RESOURCE_EXHAUSTED, which the edge
# could only answer as 429, a status clients retry.
MAX_METADATA_BYTES = 2 * EDGE_HEADERS_KB * 1024 + 16 * 1024


def build_server(app: App, address: str, streams: bool = False) -> tuple[grpc.Server, health.HealthServicer]:
    """A gRPC server with every service. The unary one has a few threads (the
    GIL makes more slower); the stream one (`streams=True`, the edge routes
    server-streaming RPCs to it) has a thread per open stream, its own
    database pool, and refuses a stream beyond its threads rather than queue it."""
    services = find_services(app.modules.service_names)
    methods = method_table(services)
    check_caps(methods, ENDPOINT_CAPS)
    workers = app.settings.stream_workers if streams else app.settings.grpc_workers
    # Unary calls beyond the workers wait in their organization's queue (taken in turns by plan), not on a
    # thread each nor in gRPC's first-come-first-served order; only `grpc_workers` of them run at once.
    executor = None if streams else FairExecutor(workers, "rpc", metrics.UNARY_QUEUED)
    pipeline = RequestPipeline(app, methods, engine=app.stream_engine if streams else app.engine, executor=executor)
    if executor is not None:  # an organization's runs leave its share of run workers to organizations waiting here
        app.runs.share_with(executor.waiting)
    server = grpc.server(
        executor or futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stream"),
        interceptors=[pipeline],
        options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 8 * 1024 * 1024),
                 ("grpc.max_metadata_size", MAX_METADATA_BYTES),
                 ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES)],
        maximum_concurrent_rpcs=workers if streams else None,
    )
    for binding in app.modules.services:
        pipeline.servicers[binding.name] = binding.servicer(app.servicer_deps_for(binding.name))
        binding.register(pipeline.servicers[binding.name], server)
    if streams:  # runs another process accepted are taken over on the stream server's pool (kernel.transport.runs)
        app.runs.revive = pipeline.revive
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [s.full_name for s in services] + [health.SERVICE_NAME, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    if server.add_insecure_port(address) == 0:
        raise SystemExit(f"cannot listen on {address}: the port is in use")
    for name in ["", *(s.full_name for s in services)]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, health_servicer


def serve(modules: Modules) -> None:
    settings = config.load()
    logs.configure(settings.log_level, settings.log_format)
    app = App(settings, modules, role="server")  # runners (process.runner) do the model's work
    tracing.configure("persona-service", settings.otlp_endpoint, [app.engine, app.stream_engine])
    app.start_background()
    host = f"[{settings.grpc_host}]" if ":" in settings.grpc_host else settings.grpc_host  # an IPv6 address
    server, health_servicer = build_server(app, f"{host}:{settings.grpc_port}")
    stream_port = settings.grpc_port + settings.stream_port_offset
    stream_server, stream_health = build_server(app, f"{host}:{stream_port}", streams=True)
    server.start()
    stream_server.start()
    # What startup built (modules, descriptors, SQLAlchemy metadata: ~200k
    # objects) leaves the collector's view: a full collection over it held the
    # GIL for 100-140 ms (measured: about one a minute under load), stalling
    # every call in flight; now ~1.5 ms. Later objects are still collected.
    gc.collect()
    gc.freeze()
    log.info("gRPC server listening on %s:%s (streams on %s)", settings.grpc_host, settings.grpc_port, stream_port)
    # SIGTERM (Kubernetes, a supervisor replacing this process): leave the balancers' rotation first. SIGINT (the
    # stack of `up` stopping every backend of its edge at once; Ctrl-C): no balancer has another backend to send
    # calls to, so no drain, only the grace for the calls in flight (issue 46: 2 s of every `up`'s stop).
    # The handlers take no lock. They run in this thread, between two of its bytecodes: one that set a
    # threading.Event could run while this thread held that Event's lock (inside its wait) and wait for it forever
    # (once seen, a SIGINT and a SIGTERM in quick succession: the server never drained and was killed; issue 46).
    received: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _: received.append(signum))
    # Never an unbounded wait: a signal the kernel hands to another of the process's threads runs its handler only
    # once this thread wakes (a SIGTERM went unnoticed until the SIGKILL 30 s later: no drain, calls cut off).
    while not received:
        time.sleep(0.1)
    drain(app, [health_servicer, stream_health], unary=server, streams=stream_server,
          seconds=settings.drain_seconds if received[0] == signal.SIGTERM else 0)
    app.close()
    tracing.shutdown()


def drain(app: App, healths: list[health.HealthServicer], unary: grpc.Server, streams: grpc.Server,
          seconds: float | None = None) -> None:
    """Leave rotation without failing a call: report NOT_SERVING (gRPC
    health, which the edge checks, and /readyz, which Kubernetes probes)
    while still serving for `drain_seconds`, until balancers have stopped
    sending calls here (streams opened before may finish meanwhile); then
    hand this process's runs over (kernel.transport.runs: another process takes each
    over from its saved state, and the open streams end without their `end`
    event, so their clients resume there with `Last-Event-ID`), refuse new
    calls and let unary calls in flight finish (within `shutdown_grace_seconds`). `seconds`: the drain's
    length, `drain_seconds` unless given."""
    settings = app.settings
    seconds = settings.drain_seconds if seconds is None else seconds
    app.draining.set()
    for servicer in healths:
        servicer.enter_graceful_shutdown()
    log.info("draining: NOT_SERVING for %.1fs before refusing new calls", seconds)
    time.sleep(seconds)
    app.runs.hand_over()
    # Stream views end themselves (a clean end of the HTTP stream) within half a second of the hand-over, once
    # their clients have a frame to resume from: a new stream's view first waits for its run's first frame,
    # and a stream still being accepted reaches its view. Those get the unary calls' grace (a fixed second
    # cut off a cold stream server's first stream, accepted just before its drain, with a 503).
    stopped = [unary.stop(grace=settings.shutdown_grace_seconds), streams.stop(grace=settings.shutdown_grace_seconds)]
    for event in stopped:
        event.wait()

