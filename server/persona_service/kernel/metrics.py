"""Prometheus metrics of the request path and background work.

Every server process writes its samples to files under
PROMETHEUS_MULTIPROC_DIR (`up` points it at `<data dir>/metrics` and
empties it at start), so `GET /metrics` on any process answers the sum over
all of them (prometheus_client's multiprocess mode). Without that variable
(a lone process) the samples live in memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import REGISTRY as DEFAULT_REGISTRY
from prometheus_client.multiprocess import MultiProcessCollector

if TYPE_CHECKING:
    from sqlalchemy import Engine

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


# The process's id, kept rather than asked for: prometheus_client's multiprocess values ask for it on every write
# (to notice a fork), which was 3 `getpid` system calls a request (issue 50). A fork updates it in the child.
_pid = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _pid.__setitem__(0, os.getpid()))


def _process_id() -> int:
    return _pid[0]


if os.environ.get(MULTIPROC_ENV):  # before any metric is made: each takes its value class when it is created
    from prometheus_client import values as _values

    # prometheus_client leaves MultiProcessValue (and MultiProcessCollector, below) unannotated.
    _values.ValueClass = _values.MultiProcessValue(process_identifier=_process_id)  # type: ignore[no-untyped-call]

REQUESTS = Counter("persona_requests_total", "RPCs answered, by RPC, HTTP status and error code",
                   ["rpc", "status", "code"])
LATENCY = Histogram("persona_request_seconds", "Time to answer an RPC (streams: until their headers), by RPC",
                    ["rpc"], buckets=(.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
REJECTIONS = Counter("persona_limit_rejections_total", "Calls refused by a rate limit or quota, by code",
                     ["code"])
REPLAYS = Counter("persona_idempotent_replays_total", "Answers replayed for an Idempotency-Key")
TASKS = Counter("persona_tasks_total", "Durable task attempts, by kind and outcome", ["kind", "outcome"])
JOBS = Counter("persona_job_runs_total", "Periodic job rounds, by job and outcome", ["job", "outcome"])
# Gauges of live processes are summed over them ("livesum"): a dead process's
# samples leave with it.
OPEN_STREAMS = Gauge("persona_open_streams", "Server streams (SSE and gRPC) open now", multiprocess_mode="livesum")
# Written only while a server's unary workers are all busy (FairPool: a call that finds a worker free costs nothing).
UNARY_QUEUED = Gauge("persona_unary_queued_calls", "Unary calls waiting for a worker of their server process "
                     "(every worker busy), taken in turns by organization", multiprocess_mode="livesum")
DB_POOL = Gauge("persona_db_pool_connections", "Server processes' PostgreSQL pool connections, by pool and state "
                "(size, checked_out), sampled every few seconds", ["pool", "state"], multiprocess_mode="livesum")
PROVIDER_CALLS = Counter("persona_provider_calls_total", "Model provider attempts (each retry counts), by provider, "
                         "operation and outcome (ok, or the error code)", ["provider", "operation", "outcome"])
PROVIDER_SECONDS = Histogram("persona_provider_seconds", "Model provider attempts' latency, by provider and "
                             "operation", ["provider", "operation"],
                             buckets=(.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
# Each a thread of the process woken (kernel.wakeups): `waited` "no" is work for nothing, a message on a channel the
# process listens to but nobody in it waits on any more (issue 50: a unary server woken by others' run frames).
WAKEUPS = Counter("persona_wakeups_total", "Wake-up messages (run frames kept, model answers delivered) a process's "
                  "subscriber received, by whether something in it waited for them", ["waited"])
# A unary operation PostgreSQL aborted (a deadlock it broke: 40P01; a snapshot it could not keep: 40001) and the
# Commit stage ran again: each is a lock order somewhere that is not the declared one (docs/concurrency.md).
RERUNS = Counter("persona_db_reruns_total", "Unary operations run again after PostgreSQL aborted their transaction, "
                 "by RPC and SQLSTATE", ["rpc", "sqlstate"])
GENERATION_RUNS = Counter("persona_generation_runs_total", "Generation pipeline runs, by kind and outcome",
                          ["kind", "outcome"])
GENERATION_STEPS = Histogram("persona_generation_step_seconds", "Generation pipeline steps, by step and outcome",
                             ["step", "outcome"], buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
_LIMIT_CODES = frozenset({"rate_limited", "quota_exceeded"})


# Labelled children, looked up once per label set (`.labels()` costs a lock
# and a dict build on every call: 16 µs a request measured, 9.6 µs cached,
# most of it the multiprocess mmap writes).
_counted: dict[tuple[str, int, str], Counter] = {}
_timed: dict[str, Histogram] = {}


def observe_request(rpc: str, status: int, code: str, seconds: float) -> None:
    counter = _counted.get((rpc, status, code))
    if counter is None:
        counter = _counted[(rpc, status, code)] = REQUESTS.labels(rpc, str(status), code)
    counter.inc()
    histogram = _timed.get(rpc)
    if histogram is None:
        histogram = _timed[rpc] = LATENCY.labels(rpc)
    histogram.observe(seconds)
    if code in _LIMIT_CODES:
        REJECTIONS.labels(code).inc()


def exposition() -> tuple[bytes, str]:
    """The text exposition of every process's samples, and its content type."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # registers itself in `registry`
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(DEFAULT_REGISTRY), CONTENT_TYPE_LATEST


class _SizedPool(Protocol):
    """What is sampled of an engine's pool (SQLAlchemy's QueuePool: kernel.data.engine gives each a size)."""

    def size(self) -> int: ...

    def checkedout(self) -> int: ...


def sample_pools(engines: Mapping[str, Engine]) -> int:
    """This process's pool sizes and connections in use (a periodic job; returns 0, nothing done)."""
    for name, engine in engines.items():
        pool = cast(_SizedPool, engine.pool)
        DB_POOL.labels(name, "size").set(pool.size())
        DB_POOL.labels(name, "checked_out").set(pool.checkedout())
    return 0
