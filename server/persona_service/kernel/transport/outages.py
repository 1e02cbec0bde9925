"""Failures of the service's own dependencies (PostgreSQL, Redis) are
outages, not bugs: the caller gets 503 `service_unavailable` with
`Retry-After`, and the next request tries again (the engine's pool drops
dead connections, the Redis client reconnects), so the service recovers by
itself when the dependency returns."""

from __future__ import annotations

import logging

import redis

from persona_service.kernel.data import outages as database
from persona_service.kernel.errors import ServiceUnavailable
from persona_service.kernel.logs import Throttled

log = logging.getLogger("persona_service.outages")
# An outage fails many calls a second: one line per dependency every 10 s (with the count it suppressed).
_warn = Throttled(log)

RETRY_AFTER_SECONDS = 2


def as_outage(exc: BaseException) -> ServiceUnavailable | None:
    """The 503 for an unreachable dependency, or None for any other error."""
    if database.unavailable(exc):
        dependency = "database"
    elif isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        dependency = "redis"
    else:
        return None
    _warn.warning(dependency, "%s unavailable: %s", dependency, type(exc).__name__)
    err = ServiceUnavailable("A service dependency is unavailable; retry shortly.", {"retryAfter": RETRY_AFTER_SECONDS})
    err.headers = {"retry-after": str(RETRY_AFTER_SECONDS)}
    return err
