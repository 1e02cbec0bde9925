"""Effective limits of an organization: its plan's tier, plus (Enterprise)
the `api.rate_limit.*` overrides, cached briefly per process. A config
write broadcasts an invalidation, so new limits apply at once everywhere."""

from __future__ import annotations

import time

from persona_service.domain.config import ConfigService
from persona_service.domain.principal import Principal
from persona_service.limits.plans import PLAN_LIMITS, Limits

CACHE_SECONDS = 10.0


class LimitsResolver:
    def __init__(self, engine):
        self.engine = engine
        self._cache: dict[str, tuple[float, Limits]] = {}

    def limits(self, principal: Principal) -> Limits:
        base = PLAN_LIMITS[principal.plan]
        if principal.plan != "enterprise":
            return base
        hit = self._cache.get(principal.org_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        with self.engine.connect() as conn:
            limits = base.with_overrides(ConfigService(conn).rate_limit_overrides(principal.org_id))
        self._cache[principal.org_id] = (time.monotonic() + CACHE_SECONDS, limits)
        return limits

    def invalidate(self, org_id: str) -> None:
        self._cache.pop(org_id, None)
