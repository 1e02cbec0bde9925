"""Short-lived hints shared by a deployment's processes (in Redis): values
a call may use to do its work faster, never ones its answer depends on. A
hint lost, expired, evicted or unreachable reads as absent and the caller
does the work the slow way, so Redis failing costs speed, never an error."""

from __future__ import annotations

import logging

import redis

log = logging.getLogger(__name__)

PREFIX = "hint:"


class Hints:
    """Hints read and kept under their prefix; the client stays private (servicers are handed a Hints)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def get(self, key: str) -> str | None:
        try:
            value = self._client.get(PREFIX + key)
        except redis.RedisError as exc:
            log.warning("hint unread (%s): %s", key, exc)
            return None
        if isinstance(value, bytes):
            return value.decode()
        return value if isinstance(value, str) else None

    def put(self, key: str, value: str, ttl_seconds: int) -> None:
        try:
            self._client.set(PREFIX + key, value, ex=ttl_seconds)
        except redis.RedisError as exc:
            log.warning("hint unkept (%s): %s", key, exc)
