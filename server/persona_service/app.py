"""The server's long-lived parts, built once per process."""

from __future__ import annotations

import logging
import threading
import time

import redis

from persona_service.config import Settings
from persona_service.db.engine import make_engine
from persona_service.domain.audit import AuditEntry, AuditLog
from persona_service.domain.auth import Authenticator, CredentialCache
from persona_service.domain.cursors import CursorCodec
from persona_service.domain.idempotency import Idempotency
from persona_service.domain.personas import PersonaService
from persona_service.domain.pricing import PriceTable
from persona_service.limits.limiter import RateLimiter
from persona_service.limits.resolver import LimitsResolver
from persona_service.providers.factory import backoff_delays, make_base_provider
from persona_service.providers.retrying import Retrying
from persona_service.secretbox import SecretBox

log = logging.getLogger(__name__)

# Cache invalidations, broadcast to every server process: "cred:<cache key>"
# evicts a credential, "limits:<org id>" an organization's limits.
INVALIDATION_CHANNEL = "persona:invalidate"


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = make_engine(settings.database_url, pool_size=settings.db_pool_size)
        self.redis = redis.Redis.from_url(settings.redis_url)
        secret = settings.resolved_jwt_secret()
        self.cache = CredentialCache(settings.auth_cache_seconds)
        self.authenticator = Authenticator(secret, self.cache, settings.jwt_ttl_seconds)
        self.cursors = CursorCodec(secret)
        self.secret_box = SecretBox(settings.resolved_secrets_key())
        self.limiter = RateLimiter(self.redis)
        self.limits = LimitsResolver(self.engine)
        self.idempotency = Idempotency(self.engine)
        self.provider = make_base_provider()
        self.backoff = backoff_delays()
        self.prices = PriceTable.from_env()
        self._listener: threading.Thread | None = None

    def provider_for(self, ctx) -> Retrying:
        """The provider for one request: retried with backoff, every failed
        upstream attempt written to the audit log (with the upstream's error
        envelope under `details`, which callers never see)."""

        def audit_upstream(error, attempt: int, operation: str) -> None:
            entry = AuditEntry.for_principal(
                ctx.principal, action="provider.call", outcome="failure", status=error.spec.http_status,
                request_id=ctx.request_id, client_ip=ctx.client_ip, resource_type="provider",
                resource_id=error.provider, error_code=error.code,
                details={"operation": operation, "attempt": attempt, "upstreamStatus": error.upstream_status,
                         "upstream": error.upstream, "reason": error.reason},
            )
            with self.engine.begin() as conn:  # durable whatever the request's outcome
                AuditLog(conn).record(entry)

        return Retrying(self.provider, delays=self.backoff, on_failure=audit_upstream)

    def invalidate(self, message: str) -> None:
        """Apply an invalidation here and broadcast it to every other server process."""
        self._apply(message)
        try:
            self.redis.publish(INVALIDATION_CHANNEL, message)
        except redis.RedisError as exc:
            log.warning("could not broadcast %s: %s", message, exc)

    def _apply(self, message: str) -> None:
        kind, _, subject = message.partition(":")
        if kind == "cred":
            self.cache.evict(subject)
        elif kind == "limits":
            self.limits.invalidate(subject)

    def start_background(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(**{INVALIDATION_CHANNEL: lambda m: self._apply(m["data"].decode())})
        self._listener = pubsub.run_in_thread(sleep_time=1.0, daemon=True, exception_handler=_log_and_continue)
        threading.Thread(target=self._purge_loop, name="purge", daemon=True).start()

    def _purge_loop(self, every_seconds: float = 600) -> None:
        """Scheduled purges (every server runs them; they are idempotent):
        expired idempotency records, soft-deleted personas past their grace."""
        while True:
            try:
                purged = self.idempotency.purge_expired()
                with self.engine.begin() as conn:
                    personas = PersonaService(conn, self.provider).purge_expired()
                if purged or personas:
                    log.info("purged %d idempotency keys and %d personas", purged, len(personas))
            except Exception:  # noqa: BLE001 - retried next round
                log.exception("scheduled purge failed")
            time.sleep(every_seconds)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self.engine.dispose()
        self.redis.close()


def _log_and_continue(exc, pubsub, thread):
    log.warning("revocation listener: %s; reconnecting", exc)
    pubsub.connection.disconnect() if pubsub.connection else None
