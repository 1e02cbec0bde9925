"""The per-organization concurrent-stream limit through Envoy: when an
organization holds its tier's number of open streams, its next stream is
429 `rate_limited` (limit `concurrent_streams`) and unary calls still pass."""

from __future__ import annotations

import redis
from persona_service.kernel.transport.limits.limiter import RateLimiter
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS
from support import assert_envelope

INTENT = "A grumpy lighthouse keeper who loves jazz"


def test_a_stream_beyond_the_tier_limit_is_429(stack, http, tenants):
    free = tenants(plan="free")
    client = redis.Redis.from_url(stack.redis_url)
    limiter = RateLimiter(client)
    limits = PLAN_LIMITS["free"]
    held = [limiter.admit(free.org_id, limits, stream=True, token=f"held-{n}") for n in range(limits.concurrent_streams)]
    try:
        r = http.post("/v1/personas?stream=true", json={"intent": INTENT}, headers=free.auth)
        error = assert_envelope(r, 429, "rate_limited")
        assert error["details"]["limit"] == "concurrent_streams"
        assert error["details"]["limitValue"] == limits.concurrent_streams
        assert r.headers["retry-after"] == "1"
        assert http.get(f"/v1/orgs/{free.org_id}", headers=free.auth).status_code == 200
    finally:
        for admission in held:
            limiter.release(admission, refund=False)
        client.close()
    r = http.post("/v1/personas?stream=true", json={"intent": INTENT}, headers=free.auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
