"""The cache invalidation bus, both ends: what a message evicts in a process, its broadcast (a servicer's
`invalidate`: the Redis client and this process's caches, not the App) and a listener's acknowledgement.

Messages: "cred:<cache key>" evicts a credential, "limits:<org id>" an organization's limits, "org:<org id>"
both for every credential of the organization (its plan changed, a member was suspended or removed), "read:…"
rows a write changed (kernel.data.read_cache). Each travels as "<ack list> <message>": every listener pushes to
the ack list once it applied it, and the sender waits for as many acks as PUBLISH reached listeners (up to
ACK_WAIT_SECONDS), so a revocation or suspension holds in every process when its call answers. The listening
loop is the App's (kernel.process.app)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

import redis

from persona_service.kernel.data import read_cache
from persona_service.kernel.logs import Throttled
from persona_service.kernel.transport.auth import DEGRADED_TTL_SECONDS, CredentialCache
from persona_service.kernel.transport.limits.resolver import CachedLimits

log = logging.getLogger(__name__)
_warn = Throttled(log)

INVALIDATION_CHANNEL = "persona:invalidate"
ACK_PREFIX = "persona:invalidate:ack:"
ACK_WAIT_SECONDS = DEGRADED_TTL_SECONDS  # a listener slower than this is as good as a bus that is down


def evictions(cache: CredentialCache, limits: CachedLimits) -> Callable[[str], None]:
    """What a message evicts in this process."""

    def apply(message: str) -> None:
        kind, _, subject = message.partition(":")
        if kind == "cred":
            cache.evict(subject)
        elif kind == "limits":
            limits.forget(subject)
        elif kind == "org":  # the organization's plan changed: its credentials and limits are read again
            cache.evict_where(lambda principal: principal.org_id == subject)
            limits.forget(subject)
        elif kind == "read":  # rows a write changed (kernel.data.read_cache)
            read_cache.apply(message)

    return apply


def broadcaster(client: redis.Redis, apply: Callable[[str], None]) -> Callable[[str], None]:
    """`invalidate(message)`: applied here and in every other server process before it returns."""

    def invalidate(message: str) -> None:
        apply(message)
        acks = ACK_PREFIX + uuid.uuid4().hex
        try:
            reached = client.publish(INVALIDATION_CHANNEL, f"{acks} {message}")
            deadline = time.monotonic() + ACK_WAIT_SECONDS
            for applied in range(reached):
                left = deadline - time.monotonic()
                if left <= 0 or client.blpop([acks], timeout=left) is None:
                    _warn.warning("ack", "%d of %d server processes did not confirm %s within %.0fs", reached - applied,
                                  reached, message, ACK_WAIT_SECONDS)
                    break
        except redis.RedisError as exc:
            _warn.warning("broadcast", "could not broadcast %s: %s", message, exc)

    return invalidate


def acknowledge(client: redis.Redis, apply: Callable[[str], None], data: bytes) -> None:
    """Apply an invalidation from the bus, then confirm it to its sender (a
    bare message, with no ack list, is applied and confirmed to no one)."""
    head, _, tail = data.decode().partition(" ")
    acks, message = (head, tail) if tail else ("", head)
    apply(message)
    if not acks:
        return
    confirm = client.pipeline(transaction=False)
    confirm.rpush(acks, 1)
    confirm.expire(acks, 60)  # a sender that stopped waiting leaves nothing behind
    confirm.execute()
