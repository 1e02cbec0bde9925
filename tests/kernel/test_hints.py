"""Hints only save work: with Redis unreachable a hint reads as absent and
keeping one is skipped, never an error for the call."""

from __future__ import annotations

import redis
from persona_service.kernel.transport.hints import Hints
from redis.backoff import NoBackoff
from redis.retry import Retry


def test_an_unreachable_redis_reads_as_no_hint():
    # Tried once: redis-py's default retry (10 tries, backing off) spends about 4 s on each refused call, and
    # what is tested is what a hint does once the call fails.
    hints = Hints(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)))
    hints.put("k", "v", 60)
    assert hints.get("k") is None
