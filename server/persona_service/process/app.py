"""The server's long-lived parts, built once per process."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import redis
from redis.client import PubSub

from persona_service.kernel import metrics
from persona_service.kernel.data import aggregates, read_cache
from persona_service.kernel.data.aggregates import LockGuard
from persona_service.kernel.data.boundaries import BoundaryGuard
from persona_service.kernel.data.engine import make_engine, share_disconnects
from persona_service.kernel.data.replicas import replica_router
from persona_service.kernel.module import Job, Modules
from persona_service.kernel.ports import DeclaredHooks
from persona_service.kernel.resources import Resources, Runtime, ServicerDeps, TaskSignals, plain, read_apart
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport import fair
from persona_service.kernel.transport.audit import FailureTally
from persona_service.kernel.transport.auth import DEGRADED_TTL_SECONDS, Authenticator, CredentialCache
from persona_service.kernel.transport.cursors import CursorCodec
from persona_service.kernel.transport.fair import FairGate
from persona_service.kernel.transport.hints import Hints
from persona_service.kernel.transport.idempotency import Idempotency
from persona_service.kernel.transport.limits.limiter import RateLimiter
from persona_service.kernel.transport.limits.resolver import LimitsResolver
from persona_service.kernel.transport.partitions import EVERY, age_out
from persona_service.kernel.transport.runs import Runs
from persona_service.kernel.transport.tasks import TaskKind, TaskRunner
from persona_service.process import redis_pool
from persona_service.process.capabilities import audit_on, generations_used, limits_of, provider_for, quota_of
from persona_service.process.invalidations import (
    INVALIDATION_CHANNEL,
    PROCESS_CHANNEL,
    acknowledge,
    broadcaster,
    evictions,
    holder,
    new_process_id,
)
from persona_service.process.readiness import readiness_of
from persona_service.providers.factory import (
    backoff_delays,
    fingerprint,
    in_process_calls,
    make_base_provider,
    model_turns,
)
from persona_service.providers.remote import RemoteProvider

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from persona_service.kernel.models import Model

log = logging.getLogger(__name__)

# The cache invalidation bus's listener (process.invalidations) retries with capped backoff.
LISTEN_FIRST_BACKOFF = 0.5
LISTEN_MAX_BACKOFF = 10.0


class App:
    """`role`: `server` (serves calls and stream views; its model calls and runs go to runners), `runner`
    (runs them: process.runner) or `all` (both in one process: one-process tools and tests)."""

    def __init__(self, settings: Settings, modules: Modules, role: str = "all"):
        self.settings = settings
        self.role = role
        self.modules = modules
        prepared = settings.db_prepared_statements
        self.engine = make_engine(settings.database_url, pool_size=settings.db_pool_size, prepared=prepared)
        # Streams hold a connection while they run: a pool of their own keeps
        # them from taking the unary calls' connections.
        self.stream_engine = make_engine(settings.database_url, pool_size=settings.stream_db_pool_size,
                                         prepared=prepared)
        share_disconnects(self.engine, self.stream_engine)
        if settings.lock_guard:
            guard = LockGuard(aggregates.ORDER)
            for engine in (self.engine, self.stream_engine):
                guard.install(engine)
        if settings.boundary_guard:
            boundary = BoundaryGuard()
            for engine in (self.engine, self.stream_engine):
                boundary.install(engine)
        self.redis = redis_pool.connect(settings.redis_url, settings.redis_max_connections,
                                        settings.redis_acquire_timeout_seconds)
        self.replicas = replica_router(settings, self.engine, self.redis)  # None: every read on the primary
        secret = settings.resolved_jwt_secret()
        self.cache = CredentialCache(settings.auth_cache_seconds)
        self.failed_auth = FailureTally()  # 401s reach the audit log a few rows per address a minute
        self.authenticator = Authenticator(
            secret, self.cache, settings.jwt_ttl_seconds, modules.credentials() if modules.credentials else None
        )
        self.cursors = CursorCodec(secret)
        self.secret_box = SecretBox(settings.resolved_secrets_key())
        self.limiter = RateLimiter(self.redis, settings.rate_limit_lease_max)
        self.limits = LimitsResolver(self.engine, modules.limit_overrides, settings.limit_override_ceiling,
                                     modules.usage_period)
        self.idempotency = Idempotency(self.engine, self.secret_box)
        self.audit = audit_on(self.engine)
        # What an invalidation evicts here; `invalidate` applies it here and in every other server process that
        # may hold it (rows of the read cache: those registered as their holders under this id).
        self._apply = evictions(self.cache, self.limits.cached)
        self.bus_id = new_process_id()
        self.invalidate = broadcaster(self.redis, self._apply, self.bus_id)
        # Processes configured for the same model do each other's model work, and only they (providers.factory).
        self.pool = fingerprint()
        self.runs = Runs(self.redis, settings.run_workers, self.engine, settings.run_lease_seconds,
                         settings.run_outage_seconds, role=role, pool=self.pool)
        self.runs.keep = self.idempotency.keep_frames  # a keyed run's replays outlive Redis's copy of its frames
        # The model's steps take turns per organization (kernel.transport.fair); an HTTP model's calls wait on the
        # network, so its runner takes as many at once as its threads may ask (providers.factory.model_turns).
        fair.install(FairGate(model_turns(settings.generation_turns, settings.grpc_workers + settings.run_workers)))
        # Durable tasks run on the stream pool: long work never holds a unary call's connection.
        self.provider: Model = make_base_provider()
        if role == "server":  # no long model work on a server's threads: runners answer its model calls
            self.provider = RemoteProvider(self.provider, self.redis, self.runs.wakeups,
                                           settings.model_call_timeout_seconds, self.pool, in_process_calls())
        self.backoff = backoff_delays()
        # What the process owns (object storage, image providers...), opened on first use.
        self.resources = Resources(settings, modules.resources)
        # Jobs run on the unary pool, tasks on the stream pool; neither sees the App.
        # Of the modules' ports, a job or task is handed those its module declared (`Module.needs`); the kernel's
        # own (the runs, the purges) none.
        self.runtime = Runtime(self.engine, self.resources, self.provider, self.audit, self.invalidate,
                               DeclaredHooks("(none declared)", {}))
        runtimes = {name: replace(self.runtime, modules=hooks) for name, hooks in modules.declared.items()}
        self._job_runtimes = {job: runtimes[owner] for job, owner in modules.job_owner.items()}
        # Streamed runs are tasks too: a process takes over those whose process died (kernel.transport.runs); a
        # runner claims runs apart from its tasks (process.runner), in turns by plan.
        kinds: dict[str, TaskKind[Runtime]] = {**modules.tasks, self.runs.kind: self.runs.task_kind()} \
            if role == "all" else dict(modules.tasks)
        self.tasks = TaskRunner(replace(self.runtime, engine=self.stream_engine), self.stream_engine,
                                kinds, settings.task_workers, settings.task_poll_seconds,
                                {kind: replace(runtimes[owner], engine=self.stream_engine)
                                 for kind, owner in modules.task_owner.items()})
        # Hot reads kept in memory where the bus reaches (runners serve no reads); every process's writes evict.
        read_cache.configure(settings.read_cache_entries if role != "runner" else 0, self.invalidate,
                             [self.engine, self.stream_engine], holder(self.redis, self.bus_id))
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        # Set while the process drains (server.drain): readiness fails, calls are still served.
        self.draining = threading.Event()
        # What servicers see of the process; neither the App, its pools nor its settings, and each capability
        # only what it uses (process.capabilities).
        # Of the modules' ports, a servicer is handed those its module declared (`Module.needs`, `servicer_deps_for`);
        # `servicer_deps` itself holds none.
        self.servicer_deps = ServicerDeps(
            cursors=self.cursors, secret_box=self.secret_box, resources=self.resources,
            modules=DeclaredHooks("(none declared)", {}),
            provider_for=provider_for(self.provider, self.backoff, self.audit), quota=quota_of(self.limits),
            limits=limits_of(self.limits), invalidate=self.invalidate,
            generations_used=generations_used(self.limiter, self.limits),
            tasks=TaskSignals(plain(self.tasks.events.wake), plain(self.tasks.events.wait_until)),
            read_apart=read_apart(self.engine),
            readiness=readiness_of(self.engine, self.redis, modules.migrations), draining=plain(self.draining.is_set),
            unary_workers=settings.grpc_workers, hints=Hints(self.redis))
        self._module_deps = {name: replace(self.servicer_deps, modules=hooks) for name, hooks in modules.declared.items()}

    def servicer_deps_for(self, service: str) -> ServicerDeps:
        """What the servicer of a gRPC service (its full name) is handed: its module's declared needs."""
        return self._module_deps[self.modules.owner[service]]

    def start_background(self) -> None:
        if self.role != "runner":  # a runner authenticates nobody and reads no limits: nothing of it to invalidate
            self._listener = threading.Thread(target=self._listen, name="invalidations", daemon=True)
            self._listener.start()
        jobs = [Job("metrics.sample_pools", 5, lambda _: metrics.sample_pools(
                    {"unary": self.engine, "stream": self.stream_engine}))]
        if self.role != "runner":  # the failed authentications a server process tallied
            jobs.append(Job("audit.failed_auth", self.failed_auth.every, lambda _: self.audit(self.failed_auth.due())))
        if self.role != "server":  # the periodic jobs and durable tasks are work for runners
            jobs += [Job("idempotency.purge", 600, lambda _: self.idempotency.purge_expired()),
                     Job("tasks.purge", 3600, lambda _: self.tasks.purge()),
                     Job("quota.purge", 3600, lambda _: self.limits.purge_draws()),
                     *self._age_out_jobs(),
                     *self.modules.jobs]
            self.tasks.start()
        for job in jobs:
            threading.Thread(target=self._run_job, args=(job,), name=job.name, daemon=True).start()

    def _age_out_jobs(self) -> list[Job]:
        """The kernel's tables that age out (kernel/transport/partitions.py): a job each, with its retention."""
        return [_age_out_job(self.engine, "audit", "audit_events", self.settings.audit_retention_days),
                _age_out_job(self.engine, "events", "events", self.settings.event_retention_days)]

    def _listen(self) -> None:
        """The invalidation bus: subscribe, apply what arrives; when Redis is
        gone, mark the bus down (cached credentials are then trusted only
        briefly), retry with capped backoff and log once per outage."""
        backoff, down_since = LISTEN_FIRST_BACKOFF, None
        while not self._closing.is_set():
            # redis-py leaves pubsub() unannotated.
            pubsub: PubSub = self.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(INVALIDATION_CHANNEL, PROCESS_CHANNEL + self.bus_id)  # all's, then this one's
                if down_since is not None:
                    # Invalidations sent while we were away are lost: forget what they could have evicted.
                    self.cache.clear()
                    self.limits.clear()
                    log.warning("invalidation bus back after %.0fs", time.monotonic() - down_since)
                read_cache.serving(True)  # emptied: it serves only what is read while evictions reach it
                self.cache.bus_up, backoff, down_since = True, LISTEN_FIRST_BACKOFF, None
                while not self._closing.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "message":
                        acknowledge(self.redis, self._apply, message["data"])
            except redis.RedisError as exc:
                self.cache.bus_up = False
                read_cache.serving(False)
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning("invalidation bus down (%s); trusting cached credentials for %.0fs at most, "
                                "reconnecting with backoff", exc, DEGRADED_TTL_SECONDS)
                self._closing.wait(backoff)
                backoff = min(LISTEN_MAX_BACKOFF, backoff * 2)
            finally:
                try:
                    pubsub.close()
                except redis.RedisError:
                    pass

    def _run_job(self, job: Job) -> None:
        """A periodic job (every server process runs them; they are idempotent)."""
        while True:
            try:
                done = job.run(self._job_runtimes.get(job.name, self.runtime))
                metrics.JOBS.labels(job.name, "ok").inc()
                if done:
                    log.info("%s: %d done", job.name, done)
            except Exception:  # noqa: BLE001 - retried next round
                metrics.JOBS.labels(job.name, "failed").inc()
                log.exception("%s failed", job.name)
            time.sleep(job.every_seconds)

    def close(self) -> None:
        self._closing.set()
        if self._listener is not None:
            self._listener.join(timeout=3)
        self.runs.close()
        self.tasks.close()
        self.resources.close()
        self.limiter.give_back()  # what this process reserved and did not use
        self.engine.dispose()
        self.stream_engine.dispose()
        if self.replicas is not None:
            self.replicas.replica.dispose()
        self.redis.close()



def _age_out_job(engine: Engine, name: str, table: str, retention_days: int) -> Job:
    """`<name>.partitions`: the table's months made ahead and those past `retention_days` dropped, hourly."""
    return Job(f"{name}.partitions", EVERY, lambda _: age_out(engine, table, retention_days, datetime.now(UTC)))
