"""Hints only save work: with Redis unreachable a hint reads as absent and
keeping one is skipped, never an error for the call."""

from __future__ import annotations

import redis
from persona_service.kernel.transport.hints import Hints


def test_an_unreachable_redis_reads_as_no_hint():
    hints = Hints(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2))
    hints.put("k", "v", 60)
    assert hints.get("k") is None
