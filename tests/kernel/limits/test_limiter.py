"""RateLimiter against the stack's real Redis (mirrors
server/persona_service/limits/limiter.py): the concurrent-generations
budget, the monthly quota (429 `quota_exceeded`, Retry-After an HTTP-date at
the billing reset) with its refund, and the endpoint caps."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import pytest
import redis
from persona_service.kernel.transport.limits.limiter import QuotaExceeded, RateLimited, RateLimiter
from persona_service.kernel.transport.limits.plans import Limits
from persona_service.process import redis_pool
from support import wait_until


@pytest.fixture(scope="module")
def limiter(stack):
    client = redis.Redis.from_url(stack.redis_url)
    yield RateLimiter(client)
    client.close()


def subject() -> str:
    return f"test-{uuid.uuid4().hex}"


def next_month_start(now: datetime) -> datetime:
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def test_concurrent_generations_budget(limiter):
    org = subject()
    limits = Limits(600, 50_000, 2, 1.0, 100)
    first = limiter.admit(org, limits, generation=True, token="req-1")
    second = limiter.admit(org, limits, generation=True, token="req-2")

    with pytest.raises(RateLimited) as info:
        limiter.admit(org, limits, generation=True, token="req-3")
    err = info.value
    assert err.code == "rate_limited"
    assert err.spec.http_status == 429
    assert err.details["limit"] == "concurrent_generations"
    assert err.details["limitValue"] == 2
    assert err.details["retryAfter"] == 1
    assert err.headers["retry-after"] == "1"
    assert "x-ratelimit-limit" in err.headers

    # Reads do not draw from the budget.
    limiter.admit(org, limits, token="read")

    limiter.release(first, refund=False)
    third = limiter.admit(org, limits, generation=True, token="req-3")
    with pytest.raises(RateLimited):
        limiter.admit(org, limits, generation=True, token="req-4")
    limiter.release(second, refund=False)
    limiter.release(third, refund=False)


def test_rejected_requests_consume_nothing(limiter):
    org = subject()
    limits = Limits(600, 50_000, 1, 1.0, 100)
    held = limiter.admit(org, limits, generation=True, token="held")
    before = int(dict(held.headers)["x-ratelimit-remaining"])
    for n in range(3):
        with pytest.raises(RateLimited):
            limiter.admit(org, limits, generation=True, token=f"refused-{n}")
    after = limiter.admit(org, limits, token="read")
    if dict(after.headers)["x-ratelimit-reset"] == dict(held.headers)["x-ratelimit-reset"]:
        assert int(dict(after.headers)["x-ratelimit-remaining"]) == before - 1
    limiter.release(held, refund=False)


def test_monthly_quota_exceeded_points_at_the_billing_reset(limiter):
    org = subject()
    limits = Limits(600, 50_000, 10, 1.0, 2)
    for n in range(2):
        limiter.release(limiter.admit(org, limits, generation=True, token=f"gen-{n}"), refund=False)

    with pytest.raises(QuotaExceeded) as info:
        limiter.admit(org, limits, generation=True, token="gen-3")
    err = info.value
    assert err.code == "quota_exceeded"
    assert err.spec.http_status == 429
    reset = parsedate_to_datetime(err.headers["retry-after"])
    assert reset == next_month_start(datetime.now(UTC))
    assert reset.tzinfo is not None and reset.utcoffset().total_seconds() == 0
    assert err.headers["retry-after"].endswith("GMT")
    assert err.details["quota"] == "generations_per_month"
    assert err.details["limit"] == 2
    assert err.details["resetAt"] == reset.isoformat().replace("+00:00", "Z")


def test_a_failed_generation_refunds_its_quota_unit(limiter):
    org = subject()
    limits = Limits(600, 50_000, 10, 1.0, 2)
    failed = limiter.admit(org, limits, generation=True, token="failed")
    limiter.release(failed, refund=True)  # the unit comes back

    kept = [limiter.admit(org, limits, generation=True, token=f"ok-{n}") for n in range(2)]
    for admission in kept:
        limiter.release(admission, refund=False)
    with pytest.raises(QuotaExceeded):
        limiter.admit(org, limits, generation=True, token="one-too-many")

    # A refund never drives the counter below zero.
    limiter.release(kept[0], refund=True)
    limiter.release(kept[0], refund=True)
    limiter.release(kept[0], refund=True)
    for n in range(2):
        limiter.release(limiter.admit(org, limits, generation=True, token=f"again-{n}"), refund=False)
    with pytest.raises(QuotaExceeded):
        limiter.admit(org, limits, generation=True, token="still-two")


def test_endpoint_cap_scales_with_the_multiplier(limiter):
    # The whole test falls in one hour window: the limiter's clock is pinned inside it.
    hour = time.time() // 3600 * 3600
    limiter = RateLimiter(limiter.redis, clock=lambda: hour + 1)
    org = subject()
    limits = Limits(600, 50_000, 0, 0.1, 100)
    assert limits.cap("personas.create") == (6, 3600)
    for _ in range(6):
        limiter.admit(org, limits, cap="personas.create")

    with pytest.raises(RateLimited) as info:
        limiter.admit(org, limits, cap="personas.create")
    err = info.value
    assert err.details["limit"] == "personas.create"
    assert err.details["limitValue"] == 6
    assert err.details["windowSeconds"] == 3600
    assert 1 <= err.details["retryAfter"] <= 3600
    assert err.headers["retry-after"] == str(err.details["retryAfter"])

    # Other RPCs of the organization are not capped by it.
    limiter.admit(org, limits)
    limiter.admit(org, limits, cap="personas.refine")


def test_concurrent_streams_budget_beside_the_generation_budget(limiter):
    org = subject()
    limits = Limits(600, 50_000, 5, 1.0, 100, concurrent_streams=2)
    first = limiter.admit(org, limits, generation=True, stream=True, token="s-1")
    second = limiter.admit(org, limits, stream=True, token="s-2")
    with pytest.raises(RateLimited) as info:
        limiter.admit(org, limits, generation=True, stream=True, token="s-3")
    assert info.value.details["limit"] == "concurrent_streams"
    assert info.value.details["limitValue"] == 2
    # The refused call took no generation slot either: four more generations fit beside the first.
    held = [limiter.admit(org, limits, generation=True, token=f"g-{n}") for n in range(4)]
    with pytest.raises(RateLimited) as info:
        limiter.admit(org, limits, generation=True, token="g-5")
    assert info.value.details["limit"] == "concurrent_generations"
    limiter.release(first, refund=False)  # leaves both of its slots
    limiter.admit(org, limits, generation=True, stream=True, token="s-4")
    for admission in [second, *held]:
        limiter.release(admission, refund=False)


# --- leases -----------------------------------------------------------------------


def minute_count(client: redis.Redis, org: str) -> int:
    keys = [k for k in client.scan_iter(f"rl:{{{org}}}:minute:*")]
    return sum(int(client.get(k) or 0) for k in keys)


def remaining(admission) -> int:
    return int(dict(admission.headers)["x-ratelimit-remaining"])


@pytest.fixture
def leasing(stack):
    """Two limiters on one Redis: two server processes."""
    clients = [redis.Redis.from_url(stack.redis_url) for _ in range(2)]
    limiters = [RateLimiter(c, lease_max=8) for c in clients]
    yield limiters
    for one, client in zip(limiters, clients):
        one.give_back()
        client.close()


@pytest.fixture
def pinned_leasing(stack):
    """A limiter whose clocks stand still: one report tick and one lease lifetime (LEASE_SECONDS) however
    slowly a loaded machine runs the test's calls."""
    client = redis.Redis.from_url(stack.redis_url)
    now = time.time()
    limiter = RateLimiter(client, lease_max=8, clock=lambda: now, monotonic=lambda: 0.0)
    yield limiter
    limiter.give_back()
    client.close()


def test_a_lease_admits_without_redis_and_counts_down(pinned_leasing):
    first = pinned_leasing
    org = subject()
    limits = Limits(100_000, 10**6, 1, 1.0, 100)
    admitted = [first.admit(org, limits) for _ in range(8)]
    # One reservation of 8 units in Redis served all eight calls.
    assert minute_count(first.redis, org) == 8
    values = [remaining(a) for a in admitted]
    # One figure per report tick, the lease counted as used: never rising, never above the truth.
    assert values == sorted(values, reverse=True)
    assert all(100_000 - 8 <= v <= 100_000 - n for n, v in enumerate(values, 1)), values
    first.admit(org, limits)
    assert minute_count(first.redis, org) == 16


def test_unused_units_are_given_back(leasing):
    first, _ = leasing
    org = subject()
    limits = Limits(100_000, 10**6, 1, 1.0, 100)
    for _ in range(3):
        first.admit(org, limits)
    first.give_back()
    assert minute_count(first.redis, org) == 3


def test_an_idle_lease_is_given_back_within_seconds(leasing):
    first, _ = leasing
    org = subject()
    limits = Limits(100_000, 10**6, 1, 1.0, 100)
    first.admit(org, limits)
    # "Within seconds": a bound with a margin for a loaded machine (it was 5 s); one never given back fails it.
    wait_until(lambda: minute_count(first.redis, org) == 1, 30, "the idle lease given back")


def test_small_limits_never_lease(leasing):
    first, _ = leasing
    org = subject()
    limits = Limits(1_999, 10**6, 1, 1.0, 100)
    for n in range(1, 4):
        first.admit(org, limits)
        assert minute_count(first.redis, org) == n


def test_leases_in_two_processes_never_over_admit(leasing):
    """Both limiters admit until both refuse: never more than the limit;
    once the idle reservations are given back, exactly the limit."""
    org = subject()
    limit = 4_000  # leases of 4 units while the window has room for 16 of them
    limits = Limits(limit, 10**6, 1, 1.0, 100)

    def drain() -> int:
        admitted, refused = 0, [False, False]
        while not all(refused):
            for i, one in enumerate(leasing):
                if refused[i]:
                    continue
                try:
                    one.admit(org, limits)
                    admitted += 1
                except RateLimited:
                    refused[i] = True
        return admitted

    minute = time.time() // 60 * 60
    for one in leasing:  # the whole drain must fall in one minute window: both clocks are pinned inside it
        one.clock = lambda: minute + 1
    first = drain()
    assert first <= limit
    for one in leasing:
        one.give_back()
    assert first + drain() == limit
    assert minute_count(leasing[0].redis, org) == limit


def test_new_limits_never_draw_on_a_lease_taken_under_the_old_ones(leasing):
    first, _ = leasing
    org = subject()
    first.admit(org, Limits(100_000, 10**6, 1, 1.0, 100))  # a lease of 8 under the old limits
    for key in first.redis.scan_iter(f"rl:{{{org}}}:minute:*"):
        first.redis.incrby(key, 5_000)  # other processes' calls
    lower = Limits(2_000, 10**6, 1, 1.0, 100)  # a downgrade: the window is already past the new limit
    with pytest.raises(RateLimited):
        first.admit(org, lower)


def test_a_burst_larger_than_the_redis_pool_waits_and_never_fails_open(stack):
    """64 concurrent admissions through a pool of 4 connections: every call
    waits its turn for a connection, none fails open (an admission without
    rate-limit headers) or errors (redis-py's default pool answered "Too
    many connections" past its size, and the limiter then failed open)."""
    client = redis_pool.connect(stack.redis_url, max_connections=4, acquire_timeout=5.0)
    limiter = RateLimiter(client)
    org, limits = subject(), Limits(600, 50_000, 64, 1.0, 1_000)  # under 2,000 a minute: no leases, Redis every call
    start = threading.Barrier(64)

    def admit(i: int):
        start.wait()
        return limiter.admit(org, limits, generation=True, token=f"req-{i}")

    try:
        with ThreadPoolExecutor(64) as pool:
            admissions = list(pool.map(admit, range(64)))
        assert all(a.headers and a.slot_keys for a in admissions)  # every one counted in Redis
        assert client.zcard(f"rl:{{{org}}}:concurrent_generations") == 64
    finally:
        client.close()


def test_a_flood_over_a_full_window_is_refused_without_asking_redis(limiter):
    org, limits = subject(), Limits(10**6, 3, 2, 1.0, 100)  # the day window fills (a minute one could reset mid-test)
    # One report tick (a remembered refusal lasts no longer: its minute figure is the tick's).
    now = time.time()
    limiter = RateLimiter(limiter.redis, clock=lambda: now)
    for i in range(3):
        limiter.admit(org, limits, token=f"ok-{i}")
    with pytest.raises(RateLimited) as first:
        limiter.admit(org, limits, token="over")
    asked = []
    script = limiter._admit
    limiter._admit = lambda **kw: asked.append(kw) or script(**kw)
    try:
        for i in range(100):
            with pytest.raises(RateLimited) as again:
                limiter.admit(org, limits, token=f"flood-{i}")
            assert again.value.details["limit"] == "day" and again.value.headers["retry-after"]
    finally:
        limiter._admit = script
    assert asked == []  # refused from memory
    assert first.value.details == again.value.details | {"retryAfter": first.value.details["retryAfter"]}


def test_the_monthly_quota_carries_into_a_window_that_replaces_it_and_not_past_a_reset(stack):
    """A subscription opened mid-month moves the quota from the calendar month to the billing period
    (issue 38): what was used comes along. Cancelling (back to the calendar month) carries it back; a
    window that follows one that ended (a renewal) starts from nothing."""
    now = time.time()
    limiter = RateLimiter(redis.Redis.from_url(stack.redis_url), clock=lambda: now)
    fresh = RateLimiter(limiter.redis, clock=lambda: now)  # another server process
    org, limits = subject(), Limits(600, 50_000, 10, 1.0, 2)
    for n in range(2):
        limiter.release(limiter.admit(org, limits, generation=True, token=f"gen-{n}"), refund=False)
    period = (int(now), int(now) + 30 * 86_400)
    for process in (limiter, fresh):
        with pytest.raises(QuotaExceeded) as info:
            process.admit(org, limits, generation=True, token="gen-x", period=period)
        assert info.value.details["resetAt"] == datetime.fromtimestamp(period[1], UTC).isoformat().replace("+00:00", "Z")
    with pytest.raises(QuotaExceeded):  # cancelled: back to the calendar month, still used up
        limiter.admit(org, limits, generation=True, token="gen-y")

    renewed = RateLimiter(limiter.redis, clock=lambda: period[1] + 1.0)
    next_period = (period[1], period[1] + 30 * 86_400)
    with pytest.raises(QuotaExceeded):  # the period in force again (the pointer names it)
        limiter.admit(org, limits, generation=True, token="gen-v", period=period)
    renewed.release(renewed.admit(org, limits, generation=True, token="gen-w", period=next_period), refund=False)
