"""Effective limits of an organization: its plan's tier, plus (Enterprise)
the `api.rate_limit.*` overrides, cached briefly per process. A config
write broadcasts an invalidation, so new limits apply at once everywhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from persona_service.kernel.limits.plans import PLAN_LIMITS, Limits
from persona_service.kernel.principal import Principal

CACHE_SECONDS = 10.0


class LimitsResolver:
    def __init__(self, engine, overrides: Callable[[Any, str], dict[str, Any]] | None = None):
        self.engine = engine
        # The limit-overrides port (Module.limit_overrides): (conn, org id) -> overrides.
        self.overrides = overrides
        self._cache: dict[str, tuple[float, Limits]] = {}

    def limits(self, principal: Principal, conn: Callable[[], Any] | None = None) -> Limits:
        """`conn`: the call's own connection, when it has one (a caller never
        needs a second connection from the pool while holding one)."""
        base = PLAN_LIMITS[principal.plan]
        if principal.plan != "enterprise":
            return base
        if self.overrides is None:
            return base
        hit = self._cache.get(principal.org_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        if conn is not None:
            limits = base.with_overrides(self.overrides(conn(), principal.org_id))
        else:
            with self.engine.connect() as own:
                limits = base.with_overrides(self.overrides(own, principal.org_id))
        self._cache[principal.org_id] = (time.monotonic() + CACHE_SECONDS, limits)
        return limits

    def invalidate(self, org_id: str) -> None:
        self._cache.pop(org_id, None)

    def clear(self) -> None:
        self._cache.clear()
