"""Fixed-window rate limiting in Redis: one atomic script call per request.

The script checks every window that applies (per-minute and per-day per
organization, the RPC's endpoint cap, the concurrent-generations budget and
the monthly generation quota) and only if all have room increments them
all, so rejected requests consume nothing and concurrent servers can never
over-admit. Keys carry the organization in a hash tag, so one call touches
one Redis Cluster slot.

When Redis is unreachable the limiter fails open (requests are served
without limits or rate-limit headers, and a warning is logged): an outage of
short-lived shared state must not take the API down.
"""

from __future__ import annotations

import calendar
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate

import redis

from persona_service.kernel.errors import ApiError
from persona_service.kernel.limits.plans import ANONYMOUS_PER_MINUTE, Limits

log = logging.getLogger(__name__)

# Generations still "running" after this long are considered abandoned.
GENERATION_STALE_MS = 15 * 60 * 1000
# Open streams older than this no longer count (a server that died holding one).
STREAM_STALE_MS = 30 * 60 * 1000

_SCRIPT = """
local now_ms = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local m = tonumber(ARGV[3])
local token = ARGV[4]
-- windows: KEYS[1..n] with ARGV[3 + 2*i] = limit, ARGV[4 + 2*i] = ttl ms
-- slots (concurrency): KEYS[n+1..n+m] with ARGV[3 + 2*n + 2*j] = limit, ARGV[4 + 2*n + 2*j] = stale ms
local minute_used = tonumber(redis.call('GET', KEYS[1]) or '0')
for i = 1, n do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if used >= tonumber(ARGV[3 + 2*i]) then
    return {'window', i, used, minute_used}
  end
end
for j = 1, m do
  local key = KEYS[n + j]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms - tonumber(ARGV[4 + 2*n + 2*j]))
  local running = redis.call('ZCARD', key)
  if running >= tonumber(ARGV[3 + 2*n + 2*j]) then
    return {'concurrency', j, running, minute_used}
  end
end
for j = 1, m do
  redis.call('ZADD', KEYS[n + j], now_ms, token)
  redis.call('PEXPIRE', KEYS[n + j], tonumber(ARGV[4 + 2*n + 2*j]))
end
local result = {'ok', 0}
for i = 1, n do
  local used = redis.call('INCR', KEYS[i])
  if used == 1 then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[4 + 2*i])) end
  table.insert(result, used)
end
return result
"""

# KEYS: the slots to leave, then (when refunding) the quota window to give a unit back to.
_RELEASE = """
local slots = tonumber(ARGV[3])
for j = 1, slots do redis.call('ZREM', KEYS[j], ARGV[1]) end
if ARGV[2] == '1' and KEYS[slots + 1] then
  local left = redis.call('DECR', KEYS[slots + 1])
  if left < 0 then redis.call('SET', KEYS[slots + 1], 0, 'KEEPTTL') end
end
return 1
"""


@dataclass(frozen=True)
class Slot:
    """A concurrency budget: calls holding one at once, per organization."""

    name: str  # "concurrent_generations", "concurrent_streams"
    limit: int
    stale_ms: int  # a holder that never released counts no longer than this
    message: str


class RateLimited(ApiError):
    code = "rate_limited"


class QuotaExceeded(ApiError):
    code = "quota_exceeded"


@dataclass(frozen=True)
class Window:
    name: str  # "minute", "day", a cap name, "month"
    key: str
    limit: int
    seconds: int  # window length (0 for the calendar month)
    resets_at: int  # unix time


@dataclass
class Admission:
    """What the limiter decided, and the headers every response carries."""

    headers: list[tuple[str, str]] = field(default_factory=list)
    slot_keys: tuple[str, ...] = ()  # concurrency slots held until the call ends
    refund_key: str = ""  # the monthly quota window a failed generation gives its unit back to
    token: str = ""


def _month_bounds(now: float) -> tuple[str, int]:
    t = datetime.fromtimestamp(now, UTC)
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return f"{t.year:04d}{t.month:02d}", calendar.timegm((year, month, 1, 0, 0, 0))


class RateLimiter:
    def __init__(self, client: redis.Redis):
        self.redis = client
        self._admit = client.register_script(_SCRIPT)
        self._release = client.register_script(_RELEASE)

    # --- windows --------------------------------------------------------------

    @staticmethod
    def _fixed(subject: str, name: str, limit: int, seconds: int, now: float) -> Window:
        index = int(now // seconds)
        return Window(name, f"rl:{{{subject}}}:{name}:{index}", limit, seconds, (index + 1) * seconds)

    def windows(self, subject: str, limits: Limits, cap: str, generation: bool, now: float) -> list[Window]:
        windows = [
            self._fixed(subject, "minute", limits.requests_per_minute, 60, now),
            self._fixed(subject, "day", limits.requests_per_day, 86_400, now),
        ]
        if cap:
            limit, seconds = limits.cap(cap)
            windows.append(self._fixed(subject, cap, limit, seconds, now))
        if generation:
            month, resets_at = _month_bounds(now)
            windows.append(Window("month", f"rl:{{{subject}}}:generations:{month}", limits.generations_per_month, 0, resets_at))
        return windows

    # --- admission --------------------------------------------------------------

    def admit(self, subject: str, limits: Limits, *, cap: str = "", generation: bool = False, stream: bool = False,
              token: str = "") -> Admission:
        now = time.time()
        windows = self.windows(subject, limits, cap, generation, now)
        slots = self.slots(limits, generation, stream)
        slot_keys = [f"rl:{{{subject}}}:{slot.name}" for slot in slots]
        args: list[int | str] = [int(now * 1000), len(windows), len(slots), token]
        for w in windows:
            ttl = (w.resets_at - int(now) + 60) * 1000
            args += [w.limit, ttl]
        for slot in slots:
            args += [slot.limit, slot.stale_ms]
        try:
            result = self._admit(keys=[w.key for w in windows] + slot_keys, args=args)
        except redis.RedisError as exc:
            log.warning("rate limiter unavailable, failing open: %s", exc)
            return Admission()
        verdict = result[0].decode() if isinstance(result[0], bytes) else result[0]
        minute = windows[0]
        if verdict == "ok":
            used_minute = int(result[2])
            headers = self.headers(limits, minute, max(0, minute.limit - used_minute), now)
            return Admission(headers, tuple(slot_keys), windows[-1].key if generation else "", token)
        minute_left = max(0, minute.limit - int(result[3])) if verdict != "ok" else 0
        if verdict == "concurrency":
            headers = self.headers(limits, minute, minute_left, now)
            slot = slots[int(result[1]) - 1]
            err = RateLimited(slot.message, {"retryAfter": 1, "limit": slot.name, "limitValue": slot.limit})
            err.headers = dict(headers) | {"retry-after": "1"}
            raise err
        blocked = windows[int(result[1]) - 1]
        blocked_headers = dict(self.headers(limits, minute, 0 if blocked is minute else minute_left, now))
        if blocked.name == "month":
            reset_at = datetime.fromtimestamp(blocked.resets_at, UTC)
            quota = QuotaExceeded(
                "The monthly generation quota is used up; it resets at the start of the next billing period.",
                {"quota": "generations_per_month", "limit": blocked.limit, "resetAt": reset_at.isoformat().replace("+00:00", "Z")},
            )
            # An HTTP-date: the billing reset time, not a cooldown in seconds.
            quota.headers = blocked_headers | {"retry-after": formatdate(blocked.resets_at, usegmt=True)}
            raise quota
        retry_after = max(1, math.ceil(blocked.resets_at - now))
        err = RateLimited(
            f"The {blocked.name} limit of {blocked.limit} requests is reached; retry in {retry_after} s.",
            {"retryAfter": retry_after, "limit": blocked.name, "limitValue": blocked.limit, "windowSeconds": blocked.seconds},
        )
        err.headers = blocked_headers | {"retry-after": str(retry_after)}
        raise err

    def admit_anonymous(self, client_ip: str | None) -> Admission:
        """Unauthenticated failures: a per-address minute window."""
        limits = Limits(ANONYMOUS_PER_MINUTE, 10**9, 0, 1.0, 0)
        try:
            return self.admit(f"ip:{client_ip or 'unknown'}", limits)
        except RateLimited as err:
            err.details["limit"] = "anonymous"
            raise

    @staticmethod
    def slots(limits: Limits, generation: bool, stream: bool) -> list[Slot]:
        slots = []
        if generation:
            slots.append(Slot("concurrent_generations", limits.concurrent_generations, GENERATION_STALE_MS,
                              "Too many generations are running for this organization; retry when one finishes."))
        if stream:
            slots.append(Slot("concurrent_streams", limits.concurrent_streams, STREAM_STALE_MS,
                              "Too many streams are open for this organization; retry when one ends."))
        return slots

    def release(self, admission: Admission, refund: bool) -> None:
        """Leave the call's concurrency slots; refund a failed generation's quota unit."""
        if not admission.slot_keys:
            return
        keys = [*admission.slot_keys, *([admission.refund_key] if refund and admission.refund_key else [])]
        try:
            self._release(keys=keys, args=[admission.token, "1" if refund else "0", len(admission.slot_keys)])
        except redis.RedisError as exc:
            log.warning("could not release a generation slot (it expires by itself): %s", exc)

    @staticmethod
    def headers(limits: Limits, minute: Window, remaining: int, now: float) -> list[tuple[str, str]]:
        reset_in = max(0, math.ceil(minute.resets_at - now))
        return [
            ("x-ratelimit-limit", str(minute.limit)),
            ("x-ratelimit-remaining", str(remaining)),
            ("x-ratelimit-reset", str(minute.resets_at)),
            ("x-service-plan-window-seconds", str(minute.seconds)),
            ("ratelimit-policy", f'"minute";q={minute.limit};w=60, "day";q={limits.requests_per_day};w=86400'),
            ("ratelimit", f'"minute";r={remaining};t={reset_in}'),
        ]
