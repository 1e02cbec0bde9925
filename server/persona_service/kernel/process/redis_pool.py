"""The process's Redis client: one bounded, blocking connection pool.

redis-py's default pool refuses a call outright ("Too many connections")
once 100 are in use, and a process has more threads than that (stream and
run workers): the limiter then failed open under load. Every Redis user of
a process (limiter, caches, runs, the invalidation bus) shares this client;
a call finding every connection busy waits up to `acquire_timeout` for one
(Redis calls take well under a millisecond), and only then is Redis treated
as unavailable."""

from __future__ import annotations

import redis


def connect(url: str, max_connections: int, acquire_timeout: float) -> redis.Redis:
    pool = redis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=acquire_timeout)
    return redis.Redis(connection_pool=pool)
