"""The cache invalidation bus, both ends: what a message evicts in a process, its sending (a servicer's
`invalidate`: the Redis client and this process's caches, not the App) and a listener's acknowledgement.

Messages: "cred:<cache key>" evicts a credential, "limits:<org id>" an organization's limits, "org:<org id>"
both for every credential of the organization (its plan changed, a member was suspended or removed), "read:…"
rows a write changed (kernel.data.read_cache). Each travels as "<ack list> <message>": every listener pushes to
the ack list once it applied it, and the sender waits for as many acks as its PUBLISH reached (up to
ACK_WAIT_SECONDS), so a revocation or suspension holds in every process when its call answers. The listening
loop is the App's (process.app).

"read:<cache>:<keys>" goes only to the processes that hold one of those rows, not to every listener (a chat
reply evicts its session: most replies' sessions are cached nowhere else). A process registers itself as a
holder of a row in Redis (`holder`: a set per row, HOLD_SECONDS long) before it reads the row from the database
to keep it; the sender takes the row's holders (and empties the set) once its transaction committed and
publishes to each one's own channel. A reader registered before that is sent the eviction (its read may
predate the write); one registered after it read after the commit. The cache serves a row no longer than its
registration lasts (kernel.data.read_cache). A cleared cache ("read:<cache>:") still goes to every listener."""

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
PROCESS_CHANNEL = "persona:invalidate:to:"  # + a listening process's id: the rows it holds
HOLDERS_PREFIX = "persona:invalidate:holders:"  # + "<cache>:<key>": the ids of the processes holding the row
ACK_PREFIX = "persona:invalidate:ack:"
ACK_WAIT_SECONDS = DEGRADED_TTL_SECONDS  # a listener slower than this is as good as a bus that is down
HOLD_SECONDS = 3600  # a holder's registration; its cache serves the row for less (HOLD_MARGIN_SECONDS)
HOLD_MARGIN_SECONDS = 60

# The rows' holders other than the sender (ARGV[1]), each sent the message once (ARGV[3], on ARGV[2] .. id);
# the sets are emptied: a holder registers again before it next reads a row. Answers how many received it.
_SEND_TO_HOLDERS = """
local to = {}
for _, key in ipairs(KEYS) do
  for _, id in ipairs(redis.call('SMEMBERS', key)) do
    if id ~= ARGV[1] then to[id] = true end
  end
end
if #KEYS > 0 then redis.call('DEL', unpack(KEYS)) end
local reached = 0
for id in pairs(to) do reached = reached + redis.call('PUBLISH', ARGV[2] .. id, ARGV[3]) end
return reached
"""


def new_process_id() -> str:
    """A listening process's id on the bus (its own channel, its holder registrations)."""
    return uuid.uuid4().hex[:16]


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


def holder(client: redis.Redis, process_id: str) -> Callable[[str, str], float | None]:
    """`hold(cache, key)`: register this process as a holder of the row (before it reads it to keep it); the
    monotonic time until which it may serve the row, or None when Redis did not take it (then it keeps none)."""

    def hold(cache: str, key: str) -> float | None:
        until = time.monotonic() + HOLD_SECONDS - HOLD_MARGIN_SECONDS  # taken before Redis starts the TTL
        holders = HOLDERS_PREFIX + cache + ":" + key
        try:
            register = client.pipeline(transaction=False)
            register.sadd(holders, process_id)
            register.expire(holders, HOLD_SECONDS)
            register.execute()
        except redis.RedisError as exc:
            _warn.warning("hold", "could not register as a holder of %s: %s", holders, exc)
            return None
        return until

    return hold


def broadcaster(client: redis.Redis, apply: Callable[[str], None], process_id: str) -> Callable[[str], None]:
    """`invalidate(message)`: applied here and in every other server process that may hold what it evicts
    before it returns."""
    to_holders = client.register_script(_SEND_TO_HOLDERS)

    def invalidate(message: str) -> None:
        apply(message)
        acks = ACK_PREFIX + uuid.uuid4().hex
        sent = f"{acks} {message}"
        try:
            rows = _held_rows(message)
            if rows is None:
                reached = client.publish(INVALIDATION_CHANNEL, sent)
            else:
                reached = to_holders(keys=rows, args=[process_id, PROCESS_CHANNEL, sent])
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


def _held_rows(message: str) -> list[str] | None:
    """The holder sets of the rows a "read:<cache>:<keys>" message evicts; None: it goes to every listener."""
    if not message.startswith(read_cache.PREFIX):
        return None
    name, _, keys = message.removeprefix(read_cache.PREFIX).partition(":")
    if not keys:
        return None  # the cache is cleared
    return [HOLDERS_PREFIX + name + ":" + key for key in keys.split(",")]


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
