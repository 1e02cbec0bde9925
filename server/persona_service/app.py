"""The server's long-lived parts, built once per process."""

from __future__ import annotations

import logging
import threading

import redis

from persona_service.config import Settings
from persona_service.db.engine import make_engine
from persona_service.domain.auth import Authenticator, CredentialCache
from persona_service.domain.cursors import CursorCodec

log = logging.getLogger(__name__)

REVOCATION_CHANNEL = "persona:credentials:revoked"


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = make_engine(settings.database_url, pool_size=settings.db_pool_size)
        self.redis = redis.Redis.from_url(settings.redis_url)
        secret = settings.resolved_jwt_secret()
        self.cache = CredentialCache(settings.auth_cache_seconds)
        self.authenticator = Authenticator(secret, self.cache, settings.jwt_ttl_seconds)
        self.cursors = CursorCodec(secret)
        self._listener: threading.Thread | None = None

    def revoke_credential(self, cache_key: str) -> None:
        """Evict a credential here and in every other server process."""
        self.cache.evict(cache_key)
        self.redis.publish(REVOCATION_CHANNEL, cache_key)

    def start_revocation_listener(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(**{REVOCATION_CHANNEL: lambda m: self.cache.evict(m["data"].decode())})
        self._listener = pubsub.run_in_thread(sleep_time=1.0, daemon=True, exception_handler=_log_and_continue)

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self.engine.dispose()
        self.redis.close()


def _log_and_continue(exc, pubsub, thread):
    log.warning("revocation listener: %s; reconnecting", exc)
    pubsub.connection.disconnect() if pubsub.connection else None
