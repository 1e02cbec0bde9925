"""Per-tier limits (spec: Limits). Pro values are the reference; the
endpoint-specific caps scale by the tier's multiplier (Free x0.1, Pro x1,
Team x5). Enterprise starts from the values below and is tuned per
organization through the `api.rate_limit.*` config items.

Monthly generation quotas (the spec gives only Pro's 100): Free 10, Pro 100,
Team 500, Enterprise 5,000 by default. Modules declare limits of their own
per tier (Module.plan_limits: a monthly quota of what they make). Quotas
count in the organization's billing period (the billing-period port;
without a subscription, the calendar month in UTC).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any, cast


@dataclass(frozen=True)
class EndpointCap:
    name: str
    pro_limit: int
    window_seconds: int


# Pro caps of the spec's endpoint table, by name; modules declare theirs
# (Module.endpoint_caps) and RPCs name them in their policy.
ENDPOINT_CAPS: dict[str, EndpointCap] = {}


def install_caps(caps: Iterable[EndpointCap]) -> None:
    for cap in caps:
        if ENDPOINT_CAPS.get(cap.name, cap) != cap:
            raise RuntimeError(f"endpoint cap {cap.name!r} is declared twice")
        ENDPOINT_CAPS[cap.name] = cap


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int
    requests_per_day: int
    concurrent_generations: int
    cap_multiplier: float
    generations_per_month: int
    # Server streams (SSE) open at once per organization, so one tenant's
    # streams cannot hold every server thread (ours; the spec names none).
    concurrent_streams: int = 5
    # The modules' own limits (PlanLimit), as (name, value) pairs; read like the fields above.
    declared: tuple[tuple[str, int | float], ...] = ()

    def __getattr__(self, name: str) -> int | float:
        for declared, value in self.__dict__.get("declared", ()):
            if declared == name:
                return cast("int | float", value)
        raise AttributeError(name)

    def names(self) -> list[str]:
        """Every limit's name: the fields above, then the declared ones."""
        return [f.name for f in fields(self) if f.name != "declared"] + [name for name, _ in self.declared]

    def value(self, name: str) -> int | float:
        """The limit `name` (a field above or a declared one)."""
        return getattr(self, name)  # type: ignore[no-any-return]  # fields, then the declared ones (__getattr__)

    def cap(self, name: str) -> tuple[int, int]:
        """(limit, window seconds) of an endpoint cap for this tier."""
        cap = ENDPOINT_CAPS[name]
        return max(1, math.floor(cap.pro_limit * self.cap_multiplier)), cap.window_seconds

    def with_overrides(self, overrides: dict[str, float], ceiling: float | None = None) -> Limits:
        """These limits with an organization's overrides, each at most
        `override_maximum(name, ceiling)` (a value stored before the operator
        lowered the ceiling is bounded too)."""
        def bounded(name: str, value: float) -> int | float:
            value = type(getattr(self, name))(value)
            return value if ceiling is None else min(value, override_maximum(name, ceiling))

        changes: dict[str, Any] = {k: bounded(k, v) for k, v in overrides.items() if k in self.names()}
        declared = tuple((name, changes.pop(name, value)) for name, value in self.declared)
        return replace(self, **changes, declared=declared)


PLAN_LIMITS = {
    "free": Limits(60, 5_000, 1, 0.1, 10, concurrent_streams=2),
    "pro": Limits(600, 50_000, 5, 1.0, 100, concurrent_streams=5),
    "team": Limits(3_000, 250_000, 25, 5.0, 500, concurrent_streams=10),
    "enterprise": Limits(6_000, 500_000, 50, 10.0, 5_000, concurrent_streams=20),
}


@dataclass(frozen=True)
class PlanLimit:
    """A limit a module declares (Module.plan_limits), e.g. a monthly quota
    of what it makes: its default on every plan. It reads like Limits'
    fields, and Enterprise organizations override it like them."""

    name: str
    by_plan: Mapping[str, int]


def install_plan_limits(limits: Iterable[PlanLimit]) -> None:
    for limit in limits:
        if set(limit.by_plan) != set(PLAN_LIMITS) or limit.name in {f.name for f in fields(Limits)}:
            raise RuntimeError(f"plan limit {limit.name!r}: a default for each plan, under a name of its own")
        for plan, value in limit.by_plan.items():
            held = dict(PLAN_LIMITS[plan].declared)
            PLAN_LIMITS[plan] = replace(PLAN_LIMITS[plan], declared=tuple({**held, limit.name: value}.items()))


@dataclass(frozen=True)
class Quota:
    """A monthly quota: `limit` units counted from `start`, resetting at `end`
    (the organization's billing period; without one, the calendar month in UTC)."""

    limit: int
    start: datetime
    end: datetime

    @classmethod
    def calendar_month(cls, limit: int, now: datetime) -> Quota:
        start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return cls(limit, start, end)

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        return self.start, self.end


def override_maximum(name: str, ceiling: float) -> int | float:
    """The most an organization may set limit `name` to: `ceiling`
    (PERSONA_LIMIT_OVERRIDE_CEILING) times the Enterprise plan's default."""
    default: int | float = getattr(PLAN_LIMITS["enterprise"], name)
    return type(default)(default * ceiling)


# Unauthenticated requests (failed credentials) are limited per client address.
ANONYMOUS_PER_MINUTE = 60
