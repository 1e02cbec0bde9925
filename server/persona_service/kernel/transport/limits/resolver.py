"""Effective limits of an organization: its plan's tier, plus (Enterprise)
the `api.rate_limit.*` overrides, cached briefly per process. A config
write broadcasts an invalidation, so new limits apply at once everywhere.
Also the period its monthly quotas count in: its billing period (the
usage-period port), else the calendar month."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine

from persona_service.kernel.ports import LimitOverrides, UsagePeriod
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS, Limits, Quota

CACHE_SECONDS = 10.0


class LimitsResolver:
    def __init__(self, engine: Engine, overrides: LimitOverrides | None = None, ceiling: float | None = None,
                 usage_period: UsagePeriod | None = None) -> None:
        self.engine = engine
        # The limit-overrides port (Module.limit_overrides): (conn, org id) -> overrides.
        self.overrides = overrides
        # PERSONA_LIMIT_OVERRIDE_CEILING: overrides beyond it apply at the maximum.
        self.ceiling = ceiling
        # The usage-period port (Module.usage_period).
        self.usage_period = usage_period
        self._cache: dict[str, tuple[float, Limits]] = {}
        self._periods: dict[str, tuple[float, tuple[int, int] | None]] = {}

    def limits(self, principal: Principal, conn: Callable[[], Connection] | None = None) -> Limits:
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
            limits = base.with_overrides(self.overrides(conn(), principal.org_id), self.ceiling)
        else:
            with self.engine.connect() as own:
                limits = base.with_overrides(self.overrides(own, principal.org_id), self.ceiling)
        self._cache[principal.org_id] = (time.monotonic() + CACHE_SECONDS, limits)
        return limits

    def quota_period(self, org_id: str, conn: Callable[[], Connection]) -> tuple[int, int] | None:
        """(start, end) in unix seconds of the organization's billing period
        now, or None (no billing module, or no subscription yet: the calendar
        month). Cached like limits, never past the period's end."""
        if self.usage_period is None:
            return None
        now = time.time()
        hit = self._periods.get(org_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        found = self.usage_period(conn(), org_id, datetime.fromtimestamp(now, UTC))
        period = None if found is None else (int(found[0].timestamp()), int(found[1].timestamp()))
        self._periods[org_id] = (min(now + CACHE_SECONDS, period[1]) if period else now + CACHE_SECONDS, period)
        return period

    def quota(self, principal: Principal, name: str, conn: Callable[[], Connection]) -> Quota:
        """A monthly quota (a Limits field, e.g. `images_per_month`) of the
        caller's organization, with the period it counts in."""
        period = self.quota_period(principal.org_id, conn)
        limit = getattr(self.limits(principal, conn), name)
        if period is None:
            return Quota.calendar_month(limit, datetime.now(UTC))
        return Quota(limit, datetime.fromtimestamp(period[0], UTC), datetime.fromtimestamp(period[1], UTC))

    def invalidate(self, org_id: str) -> None:
        self._cache.pop(org_id, None)
        self._periods.pop(org_id, None)

    def clear(self) -> None:
        self._cache.clear()
        self._periods.clear()
