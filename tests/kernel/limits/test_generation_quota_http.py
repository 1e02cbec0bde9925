"""The monthly generation quota through the edge: generation RPCs count
toward it; an overrun is 429 `quota_exceeded` with `Retry-After` as an
HTTP-date at the end of the billing period (`currentPeriodEnd`; the first
of next month, UTC, for an organization without a subscription yet), not a
cooldown; a refused generation gives its unit back; reads never count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import redis
from persona_service.billing.records import SubscriptionChanges
from persona_service.billing.repository import BillingRepository
from persona_service.config.repository import ORG_LEVEL, ConfigRepository
from persona_service.kernel.clock import iso
from support import assert_envelope, sse_events


def _lose_counters(stack, org_id: str) -> int:
    """What a Redis restart without persistence (or a flush) does to one organization: every
    counter of it is gone (its keys only, so the tests running beside it keep theirs)."""
    bus = redis.Redis.from_url(stack.redis_url)
    keys = list(bus.scan_iter(match=f"rl:{{{org_id}}}:*", count=1000))
    return bus.delete(*keys) if keys else 0


def _next_month(now: datetime) -> datetime:
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def test_quota_exceeded_points_at_the_billing_reset(http, tenants):
    tenant = tenants(plan="enterprise")
    r = http.put(
        "/v1/config/api.rate_limit.generations_per_month", headers=tenant.auth, json={"value": 2, "level": "org"}
    )
    assert r.status_code == 200, r.text
    # A generation refused by moderation does not use the quota up.
    refused = http.post("/v1/personas", headers=tenant.auth, json={"intent": "how to build a bomb"})
    assert refused.status_code == 422
    first = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A kind gardener who talks to bees"})
    assert first.status_code == 200, first.text
    persona_id = first.json()["id"]
    fork = http.post(f"/v1/personas/{persona_id}/fork", headers=tenant.auth, json={})
    assert fork.status_code == 200, fork.text
    for _ in range(3):  # reads do not count
        assert http.get(f"/v1/personas/{persona_id}", headers=tenant.auth).status_code == 200

    over = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"})
    error = assert_envelope(over, 429, "quota_exceeded")
    reset = parsedate_to_datetime(over.headers["retry-after"])
    # The organization's billing period, open since its creation (an HTTP-date: to the second).
    period_end = datetime.fromisoformat(http.get("/v1/billing/subscription", headers=tenant.auth).json()["currentPeriodEnd"])
    assert reset == period_end.replace(microsecond=0)
    assert error["details"]["limit"] == 2 and error["details"]["quota"] == "generations_per_month"
    assert "x-ratelimit-limit" in over.headers
    # Refine draws from the same quota.
    refine = http.post(f"/v1/personas/{persona_id}/refine", headers=tenant.auth, json={"instruction": "warmer"})
    assert_envelope(refine, 429, "quota_exceeded")


def test_the_quota_resets_at_the_organizations_billing_period_end(http, engine, tenants):
    """An organization billed from the 10th counts its quota from the 10th and
    its `Retry-After` names the period's end (`currentPeriodEnd`), not the
    calendar month's (issue #27)."""
    tenant = tenants(plan="enterprise")
    now = datetime.now(UTC).replace(microsecond=0)
    start, end = now - timedelta(days=3), now + timedelta(days=4, hours=5)
    with engine.begin() as conn:  # before its first request: limits are cached per process
        ConfigRepository(conn).upsert(tenant.org_id, ORG_LEVEL, "api.rate_limit.generations_per_month", 1, "test")
    assert http.get("/v1/billing/subscription", headers=tenant.auth).status_code == 200  # opened with the organization
    with engine.begin() as conn:
        BillingRepository(conn).update_subscription(
            tenant.org_id, SubscriptionChanges(current_period_start=start, current_period_end=end))
    assert http.get("/v1/billing/subscription", headers=tenant.auth).json()["currentPeriodEnd"] == iso(end)
    assert http.post("/v1/personas", headers=tenant.auth, json={"intent": "A calm lighthouse cat"}).status_code == 200

    over = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"})
    error = assert_envelope(over, 429, "quota_exceeded")
    assert parsedate_to_datetime(over.headers["retry-after"]) == end
    assert error["details"]["resetAt"] == iso(end)


def test_opening_a_subscription_mid_month_never_resets_what_was_used(http, engine, tenants):
    """The quota moves from the calendar month to the billing period once a subscription opens (issue 38):
    what the month used comes along, so the organization gets no fresh generations until the period ends. (An
    organization the previous release made during a rollout has none until its first billing write.)"""
    import time

    from persona_service.kernel.transport.limits.resolver import CACHE_SECONDS
    from sqlalchemy import text

    tenant = tenants(plan="enterprise")
    with engine.begin() as conn:  # before its first request: limits are cached per process
        ConfigRepository(conn).upsert(tenant.org_id, ORG_LEVEL, "api.rate_limit.generations_per_month", 1, "test")
        conn.execute(text("DELETE FROM subscriptions WHERE org_id = :o"), {"o": tenant.org_id})
    assert http.post("/v1/personas", headers=tenant.auth, json={"intent": "A calm lighthouse cat"}).status_code == 200
    month = assert_envelope(http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"}),
                            429, "quota_exceeded")
    assert datetime.fromisoformat(month["details"]["resetAt"]) == _next_month(datetime.now(UTC))  # the calendar's

    opened = http.post("/v1/billing/subscription/cancel", headers=tenant.auth)  # its first write opens it
    assert opened.status_code == 200, opened.text
    time.sleep(CACHE_SECONDS + 0.5)  # the servers see the new period once their cached one lapses

    over = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"})
    error = assert_envelope(over, 429, "quota_exceeded")
    assert error["details"]["resetAt"][:19] == opened.json()["currentPeriodEnd"][:19]  # the period's end, to the second


def test_losing_the_redis_counters_gives_no_quota_back(http, engine, stack, tenants):
    """The generation counter Redis lost is rebuilt from what PostgreSQL records (issue 38): an
    organization that used 2 of its 3 generations (one of them streamed) gets 1 more after Redis
    loses its counters, not 3."""
    tenant = tenants(plan="enterprise")
    with engine.begin() as conn:  # before its first request: limits are cached per process
        ConfigRepository(conn).upsert(tenant.org_id, ORG_LEVEL, "api.rate_limit.generations_per_month", 3, "test")
    assert http.post("/v1/personas", headers=tenant.auth, json={"intent": "A calm lighthouse cat"}).status_code == 200
    with http.stream("POST", "/v1/personas", params={"stream": "true"}, headers=tenant.auth,
                     json={"intent": "A wistful clockmaker"}, timeout=60) as streamed:
        assert streamed.status_code == 200
        assert list(sse_events(streamed.iter_lines()))  # to its `end`, completed

    assert _lose_counters(stack, tenant.org_id) > 0
    preview = http.post("/v1/personas/preview", headers=tenant.auth, json={"intent": "A shy astronomer"})
    assert preview.status_code == 200, preview.text
    assert preview.json()["quota"]["used"] == 2  # what PostgreSQL records, before any generation seeds Redis

    assert http.post("/v1/personas", headers=tenant.auth, json={"intent": "A shy astronomer"}).status_code == 200
    assert_envelope(http.post("/v1/personas", headers=tenant.auth, json={"intent": "A loud baker"}),
                    429, "quota_exceeded")


def test_a_preview_records_the_quota_window_on_a_read(http, tenants):
    """The first call that sees an organization's quota window records it, a read (the preview) too."""
    tenant = tenants(plan="free")
    preview = http.post("/v1/personas/preview", headers=tenant.auth, json={"intent": "A shy astronomer"})
    assert preview.status_code == 200, preview.text
    assert preview.json()["quota"]["used"] == 0
