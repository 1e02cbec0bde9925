"""The process's Redis client: one bounded, blocking connection pool.

redis-py's default pool refuses a call outright ("Too many connections")
once 100 are in use, and a process has more threads than that (stream and
run workers): the limiter then failed open under load. Every Redis user of
a process (limiter, caches, runs, the invalidation bus) shares this client;
a call finding every connection busy waits up to `acquire_timeout` for one
(Redis calls take well under a millisecond), and only then is Redis treated
as unavailable.

REDIS_URL is a plain Redis (`redis://`, `rediss://`, `unix://`) or a master
that Redis Sentinel fails over (issue 49):

    redis+sentinel://[[user]:password@]host:port[,host:port…]/<service>[/<db>][?sentinel_password=…]

(`rediss+sentinel://`: TLS to the master; the Sentinels are asked in plain
text.) The client then asks the Sentinels for the master's address whenever
it opens a connection, so every Redis user of the process (pub/sub
listeners, stream followers, the limiter: all share this pool) reaches the
new master after a failover: a connection to the old one fails (the call is
an outage: the limiter fails open, a call needing Redis is a 503 with
Retry-After), is dropped, and the next one goes to whichever master the
Sentinels name. A connection that finds its server demoted to a replica
(READONLY) is dropped the same way (redis-py's SentinelManagedConnection).
While the Sentinels name no master (the old one is down, no replica
promoted yet) opening a connection fails at once (MasterNotFoundError, a
ConnectionError)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_SENTINEL_PORT = 26379
# How long asking one Sentinel may take (connect and answer): one that is away is skipped for the next.
SENTINEL_TIMEOUT_SECONDS = 0.5


class BlockingSentinelConnectionPool(SentinelConnectionPool, redis.BlockingConnectionPool):
    """Sentinel's pool (connections to whichever master the Sentinels name) with the blocking pool's bound: a
    call finding every connection busy waits for one instead of failing."""


@dataclass(frozen=True)
class SentinelUrl:
    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    sentinel_kwargs: dict[str, object] = field(default_factory=dict)


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel(url: str) -> SentinelUrl:
    """`redis+sentinel://[[user]:password@]host:port[,host:port…]/<service>[/<db>][?sentinel_password=…]`
    (a host without a port: 26379). ValueError naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in SENTINEL_SCHEMES:
        raise ValueError(f"not a Sentinel URL (scheme {parts.scheme!r}, expected redis+sentinel://)")
    auth, _, hosts = parts.netloc.rpartition("@")
    username, password = None, None
    if auth:
        user, has_password, secret = auth.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    sentinels = []
    for host in hosts.split(","):
        if not host:
            raise ValueError("a Sentinel URL lists host:port pairs separated by commas, one of them is empty")
        if host.startswith("["):  # [IPv6]:port
            address, _, rest = host[1:].partition("]")
            port_text = rest.removeprefix(":")
        else:
            address, _, port_text = host.rpartition(":") if ":" in host else (host, "", "")
        try:
            port = int(port_text) if port_text else DEFAULT_SENTINEL_PORT
        except ValueError:
            raise ValueError(f"Sentinel {host!r}: the port is not a number") from None
        sentinels.append((address, port))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError("a Sentinel URL names the master's service after the hosts (…/mymaster or …/mymaster/0)")
    try:
        db = int(path[1]) if len(path) == 2 else 0
    except ValueError:
        raise ValueError(f"the database number {path[1]!r} is not a number") from None
    query = parse_qs(parts.query)
    unknown = set(query) - {"sentinel_password", "sentinel_username"}
    if unknown:
        raise ValueError(f"unknown Sentinel URL options: {', '.join(sorted(unknown))}")
    sentinel_kwargs: dict[str, object] = {"socket_timeout": SENTINEL_TIMEOUT_SECONDS,
                                          "socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS}
    for option in ("sentinel_password", "sentinel_username"):
        if option in query:
            sentinel_kwargs[option.removeprefix("sentinel_")] = query[option][-1]
    return SentinelUrl(sentinels, unquote(path[0]), db, username, password,
                       parts.scheme.lower().startswith("rediss"), sentinel_kwargs)


def connect(url: str, max_connections: int, acquire_timeout: float) -> redis.Redis:
    if is_sentinel(url):
        return connect_sentinel(parse_sentinel(url), max_connections, acquire_timeout)
    pool = redis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=acquire_timeout)
    return redis.Redis(connection_pool=pool)


def connect_sentinel(target: SentinelUrl, max_connections: int, acquire_timeout: float) -> redis.Redis:
    """A client of the master the Sentinels name now (asked again for every new connection)."""
    # redis-py leaves Sentinel's constructor and master_for unannotated.
    sentinel = Sentinel(target.sentinels, sentinel_kwargs=target.sentinel_kwargs)  # type: ignore[no-untyped-call]
    master_kwargs: dict[str, object] = {"db": target.db}
    if target.username is not None:
        master_kwargs["username"] = target.username
    if target.password is not None:
        master_kwargs["password"] = target.password
    if target.ssl:
        master_kwargs["ssl"] = True
    master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        target.service, connection_pool_class=BlockingSentinelConnectionPool, max_connections=max_connections,
        timeout=acquire_timeout, **master_kwargs)
    return master
