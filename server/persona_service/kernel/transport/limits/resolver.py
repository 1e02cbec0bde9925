"""Effective limits of an organization: its plan's tier, plus (Enterprise)
the `api.rate_limit.*` overrides, cached briefly per process. A config
write broadcasts an invalidation, so new limits apply at once everywhere.
Also the period its monthly quotas count in: its billing period (the
usage-period port), else the calendar month; and since when they count in it
(a window that replaced another before that one reset counts on from it:
kernel.data.quota_repository)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine

from persona_service.kernel.data.quota_repository import QuotaRepository
from persona_service.kernel.data.work import Work
from persona_service.kernel.ports import LimitOverrides, UsagePeriod
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS, Limits, Quota

CACHE_SECONDS = 10.0


class CachedLimits:
    """What a resolver keeps of each organization for CACHE_SECONDS, apart from the pool it reads on:
    an invalidation drops it (process.invalidations) holding this and not the resolver."""

    __slots__ = ("limits", "periods")

    def __init__(self) -> None:
        self.limits: dict[str, tuple[float, Limits]] = {}  # org id -> (expiry, limits)
        # org id -> (expiry, billing period or None, since when its quotas count)
        self.periods: dict[str, tuple[float, tuple[int, int] | None, datetime]] = {}

    def forget(self, org_id: str) -> None:
        self.limits.pop(org_id, None)
        self.periods.pop(org_id, None)

    def clear(self) -> None:
        self.limits.clear()
        self.periods.clear()


class LimitsResolver:
    def __init__(self, engine: Engine, overrides: LimitOverrides | None = None, ceiling: float | None = None,
                 usage_period: UsagePeriod | None = None) -> None:
        self.engine = engine
        # The limit-overrides port (Module.limit_overrides): (work, org id) -> overrides.
        self.overrides = overrides
        # PERSONA_LIMIT_OVERRIDE_CEILING: overrides beyond it apply at the maximum.
        self.ceiling = ceiling
        # The usage-period port (Module.usage_period).
        self.usage_period = usage_period
        self.cached = CachedLimits()

    def limits(self, principal: Principal, conn: Callable[[], Connection] | None = None) -> Limits:
        """`conn`: the call's own connection, when it has one (a caller never
        needs a second connection from the pool while holding one)."""
        base = PLAN_LIMITS[principal.plan]
        if principal.plan != "enterprise":
            return base
        if self.overrides is None:
            return base
        hit = self.cached.limits.get(principal.org_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        if conn is not None:
            limits = base.with_overrides(self.overrides(Work.on(conn()), principal.org_id), self.ceiling)
        else:
            with self.engine.connect() as own:
                limits = base.with_overrides(self.overrides(Work.on(own), principal.org_id), self.ceiling)
        self.cached.limits[principal.org_id] = (time.monotonic() + CACHE_SECONDS, limits)
        return limits

    def quota_period(self, org_id: str, conn: Callable[[], Connection]) -> tuple[int, int] | None:
        """(start, end) in unix seconds of the organization's billing period
        now, or None (no subscription yet: the calendar month). Cached like
        limits, never past the period's end."""
        return self._window(org_id, conn)[0]

    def quota_since(self, org_id: str, conn: Callable[[], Connection]) -> datetime:
        """Since when the organization's monthly quotas count: the start of its
        window in force, or of the earliest window that window replaced before
        it reset (opening or changing a subscription mid-period resets nothing)."""
        return self._window(org_id, conn)[1]

    def drawn(self, org_id: str, quota: str, conn: Callable[[], Connection]) -> int:
        """Units of a Redis-counted quota (e.g. generations) that committed calls used since it
        counts, as PostgreSQL records them: what a counter Redis lost starts again from."""
        return QuotaRepository(conn()).drawn_since(org_id, quota, self.quota_since(org_id, conn))

    def _window(self, org_id: str, conn: Callable[[], Connection]) -> tuple[tuple[int, int] | None, datetime]:
        now = time.time()
        hit = self.cached.periods.get(org_id)
        if hit is not None and hit[0] > now:
            return hit[1], hit[2]
        moment = datetime.fromtimestamp(now, UTC)
        found = None if self.usage_period is None else self.usage_period(Work.on(conn()), org_id, moment)
        start, end = found if found is not None else Quota.calendar_month(0, moment).bounds
        since = QuotaRepository(conn()).counts_since(org_id, start, end, moment)
        period = None if found is None else (int(start.timestamp()), int(end.timestamp()))
        self.cached.periods[org_id] = (min(now + CACHE_SECONDS, end.timestamp()), period, since)
        return period, since

    def quota(self, principal: Principal, name: str, conn: Callable[[], Connection]) -> Quota:
        """A monthly quota (a Limits field, e.g. `images_per_month`) of the
        caller's organization: counted since `quota_since`, resetting at its
        window's end."""
        period, since = self._window(principal.org_id, conn)
        limit = getattr(self.limits(principal, conn), name)
        if period is None:
            return replace(Quota.calendar_month(limit, datetime.now(UTC)), start=since)
        return Quota(limit, since, datetime.fromtimestamp(period[1], UTC))

    def purge_draws(self) -> int:
        """A periodic job: the quota draws no window counts any more."""
        with self.engine.begin() as conn:
            return QuotaRepository(conn).purge_counted_out()

    def invalidate(self, org_id: str) -> None:
        self.cached.forget(org_id)

    def clear(self) -> None:
        self.cached.clear()
