"""The server's long-lived parts, built once per process."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import redis

from persona_service.kernel import metrics
from persona_service.kernel.data import aggregates, read_cache
from persona_service.kernel.data.aggregates import LockGuard
from persona_service.kernel.data.engine import make_engine, share_disconnects
from persona_service.kernel.data.replicas import replica_router
from persona_service.kernel.logs import Throttled
from persona_service.kernel.process import redis_pool
from persona_service.kernel.process.module import Job, Modules
from persona_service.kernel.process.readiness import readiness_of
from persona_service.kernel.process.resources import Resources, Runtime, ServicerDeps, TaskSignals, plain, read_apart
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport import fair
from persona_service.kernel.transport.audit import AuditEntry, AuditLog, FailureTally
from persona_service.kernel.transport.auth import DEGRADED_TTL_SECONDS, Authenticator, CredentialCache
from persona_service.kernel.transport.cursors import CursorCodec
from persona_service.kernel.transport.fair import FairGate
from persona_service.kernel.transport.hints import Hints
from persona_service.kernel.transport.idempotency import Idempotency
from persona_service.kernel.transport.limits.limiter import GENERATIONS, RateLimiter
from persona_service.kernel.transport.limits.resolver import LimitsResolver
from persona_service.kernel.transport.partitions import EVERY, age_out
from persona_service.kernel.transport.runs import Runs
from persona_service.kernel.transport.tasks import TaskKind, TaskRunner
from persona_service.providers.factory import backoff_delays, fingerprint, make_base_provider, model_turns
from persona_service.providers.remote import RemoteProvider
from persona_service.providers.retrying import Retrying, failure_details

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy import Connection, Engine

    from persona_service.kernel.principal import Principal
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.providers.base import Provider, ProviderError

log = logging.getLogger(__name__)
_warn = Throttled(log)

# Cache invalidations, broadcast to every server process: "cred:<cache key>"
# evicts a credential, "limits:<org id>" an organization's limits, "org:<org
# id>" both for every credential of the organization (its plan changed, a
# member was suspended or removed). Each travels as "<ack list> <message>":
# every listener pushes to the ack list once it applied it, and the sender
# waits for as many acks as PUBLISH reached listeners (up to ACK_WAIT_SECONDS),
# so a revocation or suspension holds in every process when its call answers.
INVALIDATION_CHANNEL = "persona:invalidate"
ACK_PREFIX = "persona:invalidate:ack:"
ACK_WAIT_SECONDS = DEGRADED_TTL_SECONDS  # a listener slower than this is as good as a bus that is down
LISTEN_FIRST_BACKOFF = 0.5
LISTEN_MAX_BACKOFF = 10.0


class App:
    """`role`: `server` (serves calls and stream views; its model calls and runs go to runners), `runner`
    (runs them: kernel.process.runner) or `all` (both in one process: one-process tools and tests)."""

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
        # Processes configured for the same model do each other's model work, and only they (providers.factory).
        self.pool = fingerprint()
        self.runs = Runs(self.redis, settings.run_workers, self.engine, settings.run_lease_seconds,
                         settings.run_outage_seconds, role=role, pool=self.pool)
        # The model's steps take turns per organization (kernel.transport.fair); an HTTP model's calls wait on the
        # network, so its runner takes as many at once as its threads may ask (providers.factory.model_turns).
        fair.install(FairGate(model_turns(settings.generation_turns, settings.grpc_workers + settings.run_workers)))
        # Durable tasks run on the stream pool: long work never holds a unary call's connection.
        self.provider: Provider = make_base_provider()
        if role == "server":  # no model work on a server's threads: runners answer its model calls
            self.provider = RemoteProvider(self.provider, self.redis, self.runs.wakeups,
                                           settings.model_call_timeout_seconds, self.pool)
        self.backoff = backoff_delays()
        # What the process owns (object storage, image providers...), opened on first use.
        self.resources = Resources(settings)
        # Jobs run on the unary pool, tasks on the stream pool; neither sees the App.
        self.runtime = Runtime(self.engine, self.resources, self.provider, self.audit, self.invalidate, modules)
        # Streamed runs are tasks too: a process takes over those whose process died (kernel.transport.runs); a
        # runner claims runs apart from its tasks (kernel.process.runner), in turns by plan.
        kinds: dict[str, TaskKind[Runtime]] = {**modules.tasks, self.runs.kind: self.runs.task_kind()} \
            if role == "all" else dict(modules.tasks)
        self.tasks = TaskRunner(replace(self.runtime, engine=self.stream_engine), self.stream_engine,
                                kinds, settings.task_workers, settings.task_poll_seconds)
        # Hot reads kept in memory where the bus reaches (runners serve no reads); every process's writes evict.
        read_cache.configure(settings.read_cache_entries if role != "runner" else 0, self.invalidate,
                             [self.engine, self.stream_engine])
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        # Set while the process drains (server.drain): readiness fails, calls are still served.
        self.draining = threading.Event()
        # What servicers see of the process; neither the App, its pools nor its settings.
        self.servicer_deps = ServicerDeps(
            cursors=self.cursors, secret_box=self.secret_box, resources=self.resources, modules=modules,
            provider_for=plain(self.provider_for), quota=plain(self.limits.quota), limits=plain(self.limits.limits),
            invalidate=plain(self.invalidate),
            generations_used=plain(self._generations_used),
            tasks=TaskSignals(plain(self.tasks.wake), plain(self.tasks.wait_until)), read_apart=read_apart(self.engine),
            readiness=readiness_of(self.engine, self.redis, modules.migrations), draining=plain(self.draining.is_set),
            unary_workers=settings.grpc_workers, hints=Hints(self.redis))

    def _generations_used(self, principal: Principal, conn: Callable[[], Connection]) -> int:
        return self.limiter.generations_used(principal.org_id, self.limits.quota_period(principal.org_id, conn),
                                             lambda: self.limits.drawn(principal.org_id, GENERATIONS, conn))

    def provider_for(self, ctx: RequestContext) -> Retrying:
        """The provider for one request: retried with backoff, every failed
        upstream attempt written to the audit log (with the upstream's error
        envelope under `details`, which callers never see)."""

        def audit_upstream(error: ProviderError, attempt: int, operation: str) -> None:
            entry = AuditEntry.for_principal(
                ctx.principal, action="provider.call", outcome="failure", status=error.spec.http_status,
                request_id=ctx.request_id, client_ip=ctx.client_ip, resource_type="provider",
                resource_id=error.provider, error_code=error.code,
                details=failure_details(error, attempt, operation),
            )
            self.audit([entry])

        return Retrying(self.provider, delays=self.backoff, on_failure=audit_upstream)

    def audit(self, entries: list[AuditEntry]) -> int:
        """Write audit rows in a transaction of their own (durable whatever the request's outcome)."""
        if entries:
            with self.engine.begin() as conn:
                audit_log = AuditLog(conn)
                for entry in entries:
                    audit_log.record(entry)
        return len(entries)

    def invalidate(self, message: str) -> None:
        """Apply an invalidation here and in every other server process before returning."""
        self._apply(message)
        acks = ACK_PREFIX + uuid.uuid4().hex
        try:
            reached = self.redis.publish(INVALIDATION_CHANNEL, f"{acks} {message}")
            deadline = time.monotonic() + ACK_WAIT_SECONDS
            for applied in range(reached):
                left = deadline - time.monotonic()
                if left <= 0 or self.redis.blpop([acks], timeout=left) is None:
                    _warn.warning("ack", "%d of %d server processes did not confirm %s within %.0fs", reached - applied,
                                  reached, message, ACK_WAIT_SECONDS)
                    break
        except redis.RedisError as exc:
            _warn.warning("broadcast", "could not broadcast %s: %s", message, exc)

    def _acknowledge(self, data: bytes) -> None:
        """Apply an invalidation from the bus, then confirm it to its sender (a
        bare message, with no ack list, is applied and confirmed to no one)."""
        head, _, tail = data.decode().partition(" ")
        acks, message = (head, tail) if tail else ("", head)
        self._apply(message)
        if not acks:
            return
        confirm = self.redis.pipeline(transaction=False)
        confirm.rpush(acks, 1)
        confirm.expire(acks, 60)  # a sender that stopped waiting leaves nothing behind
        confirm.execute()

    def _apply(self, message: str) -> None:
        kind, _, subject = message.partition(":")
        if kind == "cred":
            self.cache.evict(subject)
        elif kind == "limits":
            self.limits.invalidate(subject)
        elif kind == "org":  # the organization's plan changed: its credentials and limits are read again
            self.cache.evict_where(lambda principal: principal.org_id == subject)
            self.limits.invalidate(subject)
        elif kind == "read":  # rows a write changed (kernel.data.read_cache)
            read_cache.apply(message)

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
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(INVALIDATION_CHANNEL)
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
                        self._acknowledge(message["data"])
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
                done = job.run(self.runtime)
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
