"""Fixed-window rate limiting in Redis: one atomic script call per admission.

The script checks every window that applies (per-minute and per-day per
organization, the RPC's endpoint cap, the concurrent-generations and
concurrent-streams budgets, the monthly generation quota) and only if all
have room increments them all, so rejected requests consume nothing and
concurrent servers can never over-admit. Keys carry the organization in a
hash tag, so one call touches one Redis Cluster slot.

Leases (the hot path): a call that holds no slot may reserve up to
`lease_max` units of its windows at once, when every window has room for
sixteen such reservations; the process then admits the next calls of the
same windows from that reservation without a Redis round trip, for at most
`LEASE_SECONDS`, and gives back what it did not use. Reserved units are
counted in Redis before they are used, so leases never over-admit; the cost
is that up to one lease per server process (at most 1/1000 of the smallest
limit) may sit unused elsewhere for up to a second while this process sees
the window as full. Limits under 2,000 per window never lease, so they stay
exact, and the last 1.6% of every window is admitted one call at a time.

What the headers report while leases are in use: a lease-served call
cannot see what other processes admitted since, so each process counting
down its own lease would make `X-RateLimit-Remaining` rise and fall between
two processes. Instead, for every minute window large enough to lease, all
processes report one figure per `REPORT_SECONDS` tick: the first answer
Redis gives in a tick fixes the window's count for that tick (its units
reserved by leases included, never lower than the tick before's), and a
lease ends with its tick. So within one window Remaining never rises, on any
process, and it is within these bounds of the truth (the limit less the
calls admitted): at most the units leased but not yet used (up to
`lease_max` per server process) below it, and at most the calls admitted
since the tick began (the last 250 ms) above it. A 429 of the minute window
reports 0, and the window then reports 0 until it resets. Windows that
never lease (under 2,000 a minute) report the exact count on every call.

Refusals are cheap: once Redis answers that a window is full, the process
refuses the next calls of the same windows from memory for
`REFUSAL_MEMORY_SECONDS` (a flood far over a limit costs no Redis round
trip); a unit given back meanwhile (an unused lease, a refunded generation)
is admitted at most that much later (at once in the process that gave it back).
Where the minute window is reported per tick (above), a refusal is
remembered only until the tick ends, so its headers never lag the tick's.

The monthly generation quota's counter is also what PostgreSQL records: a
committed generation writes a draw (kernel.data.quota_repository) with its
changes, and a counter Redis lost (a restart without persistence, a flush)
is seeded from those draws (SET NX) before the admission counts, so losing
Redis never gives an organization its quota back (at most the generations
in flight when it was lost go uncounted). A counter that is there but
behind (Redis restarted from an older snapshot, or failed over to a replica
that lagged) is raised to PostgreSQL's count: each process does that for an
organization's first generation in a quota window, and again whenever
Redis's run id changes (every restart and failover changes it).

When Redis is unreachable the limiter fails open (requests are served
without limits or rate-limit headers, and a warning is logged): an outage of
short-lived shared state must not take the API down.
"""

from __future__ import annotations

import calendar
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from typing import TypeAlias

import redis

from persona_service.kernel.errors import ApiError
from persona_service.kernel.logs import Throttled
from persona_service.kernel.transport.limits.plans import ANONYMOUS_PER_MINUTE, Limits

log = logging.getLogger(__name__)
# While Redis is down every call fails open: one line per kind of failure every 10 s, not one per call.
_warn = Throttled(log)

# Generations still "running" after this long are considered abandoned.
GENERATION_STALE_MS = 15 * 60 * 1000
# Open streams older than this no longer count (a server that died holding one).
STREAM_STALE_MS = 30 * 60 * 1000
# A lease is at most this share of the smallest window limit, and lives this long.
LEASE_DIVISOR = 1000
LEASE_SECONDS = 1.0
# A lease is granted only while every window has room for this many of them.
LEASE_HEADROOM = 16
# A window Redis reported full is refused from memory for this long (a flood of 429s costs no round trip).
REFUSAL_MEMORY_SECONDS = 1.0
# Leasing windows report one Remaining per tick this long, the same on every process (module docstring).
REPORT_SECONDS = 0.25
# How often a process asks Redis's run id (a counter may have gone back with a restart or failover).
SERVER_ID_SECONDS = 5.0
# The monthly generation quota's name in its counters' keys and in PostgreSQL's record of its draws.
GENERATIONS = "generations"
# The per-address window of calls without a valid credential.
ANONYMOUS_LIMITS = Limits(ANONYMOUS_PER_MINUTE, 10**9, 0, 1.0, 0)
# The admission script's reply (_SCRIPT): its verdict (bytes; str from a client that decodes replies), then integers.
Reply: TypeAlias = list[bytes | str | int]

_SCRIPT = """
local now_ms = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local m = tonumber(ARGV[3])
local token = ARGV[4]
local want = tonumber(ARGV[5])
-- windows: KEYS[1..n] with ARGV[4 + 2*i] = limit, ARGV[5 + 2*i] = ttl ms
-- slots (concurrency): KEYS[n+1..n+m] with ARGV[4 + 2*n + 2*j] = limit, ARGV[5 + 2*n + 2*j] = stale ms
-- want: units asked for (a lease); granted only with room for LEASE_HEADROOM leases in every window, else 1
-- optional: KEYS[n+m+1], the minute window's reported count, fixed per tick ARGV[7 + 2*n + 2*m]
-- ARGV[8 + 2*n + 2*m] = '1': the last window (a quota) must exist; missing (Redis lost it), the caller
-- seeds it from PostgreSQL first
if ARGV[8 + 2*n + 2*m] == '1' and redis.call('EXISTS', KEYS[n]) == 0 then return {'unseeded'} end
local minute_used = tonumber(redis.call('GET', KEYS[1]) or '0')
-- The count every process reports in this tick: the first answer of the tick fixes it, never below the
-- tick before's (given-back units do not raise Remaining); a full minute window reports full until it resets.
local function shown(used, full)
  local key = KEYS[n + m + 1]
  if not key then return used end
  local tick = ARGV[7 + 2*n + 2*m]
  local at = redis.call('HMGET', key, 't', 'v')
  local value = tonumber(at[2] or '0')
  if at[1] ~= tick then value = math.max(value, used) end
  if full then value = math.max(value, tonumber(ARGV[6])) end
  redis.call('HSET', key, 't', tick, 'v', value)
  redis.call('PEXPIRE', key, tonumber(ARGV[7]))
  return value
end
local grant = want
for i = 1, n do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  local left = tonumber(ARGV[4 + 2*i]) - used
  if left < 1 then
    return {'window', i, used, minute_used, shown(minute_used, i == 1)}
  end
  if left < want * tonumber(ARGV[6 + 2*n + 2*m]) then grant = 1 end
end
for j = 1, m do
  local key = KEYS[n + j]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms - tonumber(ARGV[5 + 2*n + 2*j]))
  local running = redis.call('ZCARD', key)
  if running >= tonumber(ARGV[4 + 2*n + 2*j]) then
    return {'concurrency', j, running, minute_used, shown(minute_used, false)}
  end
end
for j = 1, m do
  redis.call('ZADD', KEYS[n + j], now_ms, token)
  redis.call('PEXPIRE', KEYS[n + j], tonumber(ARGV[5 + 2*n + 2*j]))
end
local result = {'ok', grant}
for i = 1, n do
  local used = redis.call('INCRBY', KEYS[i], grant)
  if used == grant then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[5 + 2*i])) end
  table.insert(result, used)
end
table.insert(result, shown(result[3], false))
return result
"""

# KEYS: the windows of a lease; ARGV[1]: its unused units, given back.
_GIVE_BACK = """
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('DECRBY', KEYS[i], ARGV[1]) < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
return 1
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

# The monthly quota across a change of its window (a subscription opened, changed or cancelled
# mid-period moves it from the calendar month to the billing period, or to another period): the
# new window starts with what the window it replaces used, unless that one had ended (reset).
# KEYS[1]: the organization's pointer to its window in force; KEYS[2]: the window now in force.
# ARGV: now (s), the new window's reset time (s), its TTL (ms).
# Raise a quota counter to PostgreSQL's count (ARGV[1]); never lower it: Redis also counts generations in flight.
_CATCH_UP = """
if tonumber(redis.call('GET', KEYS[1]) or '-1') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
end
"""

_CARRY = """
local current = redis.call('HMGET', KEYS[1], 'key', 'resets_at')
if current[1] == KEYS[2] then return 0 end
local carried = 0
if current[1] and tonumber(current[2]) > tonumber(ARGV[1]) then
  -- Counts are what the organization used since the earliest window carried: the larger one stands
  -- (back to a window it left, e.g. a cancelled subscription's calendar month, nothing is counted twice).
  carried = tonumber(redis.call('GET', current[1]) or '0')
  if carried > tonumber(redis.call('GET', KEYS[2]) or '0') then
    redis.call('SET', KEYS[2], carried, 'PX', tonumber(ARGV[3]))
  end
end
redis.call('HSET', KEYS[1], 'key', KEYS[2], 'resets_at', ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return carried
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


@dataclass(frozen=True)
class Ask:
    """One admission's question to Redis: the windows and slots that apply,
    and the script's keys and arguments."""

    now: float
    limits: Limits
    windows: list[Window]
    slots: list[Slot]
    keys: list[str]
    want: int  # units asked for: a lease, or 1
    token: str
    generation: bool
    shown_key: str = ""  # the minute window's per-tick reported count, when it can lease ("" : exact)
    tick: int = 0

    @property
    def window_keys(self) -> list[str]:
        return self.keys[:len(self.windows)]

    def script_args(self) -> list[int | str]:
        """The admission script's arguments (built only when Redis is asked)."""
        now = self.now
        args: list[int | str] = [int(now * 1000), len(self.windows), len(self.slots), self.token, self.want]
        for w in self.windows:
            args += [w.limit, (w.resets_at - int(now) + 60) * 1000]
        for slot in self.slots:
            args += [slot.limit, slot.stale_ms]
        args += [LEASE_HEADROOM, self.tick, "1" if self.generation else "0"]
        return args


@dataclass
class _Lease:
    """Units this process reserved in Redis and has not used yet."""

    keys: tuple[str, ...]
    left: int
    minute_used: int  # the minute window's count right after the reservation
    expires: float  # monotonic
    shown: int | None = None  # the count reported in its tick (it ends with the tick), when reported per tick
    tick: int = 0


class RateLimiter:
    def __init__(self, client: redis.Redis, lease_max: int = 64, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        self.redis = client
        self.lease_max = lease_max
        # The wall clock the windows are counted on (tests pin it inside one window instead of waiting).
        self.clock = clock
        # The clock leases and remembered refusals expire on (tests pin it so a lease outlives a slow test).
        self.monotonic = monotonic
        self._admit = client.register_script(_SCRIPT)
        self._release = client.register_script(_RELEASE)
        self._give_back = client.register_script(_GIVE_BACK)
        self._carry = client.register_script(_CARRY)
        self._catch_up = client.register_script(_CATCH_UP)
        # The monthly quota window this process last saw in force, per organization (its carry is done).
        self._quota_windows: dict[str, str] = {}
        # Per organization, the quota window and Redis run id its counter was last checked against PostgreSQL in.
        self._checked: dict[str, tuple[str, str]] = {}
        # Redis's run id, and when (monotonic) this process asks it again.
        self._server: tuple[str, float] = ("", 0.0)
        self._leases: dict[tuple[object, ...], _Lease] = {}
        # lease key -> (monotonic expiry, the script's refusal, its report tick)
        self._refused: dict[tuple[object, ...], tuple[float, Reply, int]] = {}
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None

    # --- windows --------------------------------------------------------------

    @staticmethod
    def _fixed(subject: str, name: str, limit: int, seconds: int, now: float) -> Window:
        index = int(now // seconds)
        return Window(name, f"rl:{{{subject}}}:{name}:{index}", limit, seconds, (index + 1) * seconds)

    def windows(self, subject: str, limits: Limits, cap: str, generation: bool, now: float,
                period: tuple[int, int] | None = None) -> list[Window]:
        """`period`: the organization's billing period (start, end), which its
        monthly quota counts in; None: the calendar month."""
        windows = [
            self._fixed(subject, "minute", limits.requests_per_minute, 60, now),
            self._fixed(subject, "day", limits.requests_per_day, 86_400, now),
        ]
        if cap:
            limit, seconds = limits.cap(cap)
            windows.append(self._fixed(subject, cap, limit, seconds, now))
        if generation:
            month, resets_at = (f"p{period[0]}", period[1]) if period else _month_bounds(now)
            windows.append(Window("month", f"rl:{{{subject}}}:{GENERATIONS}:{month}", limits.generations_per_month, 0, resets_at))
        return windows

    def generations_used(self, subject: str, period: tuple[int, int] | None = None,
                         drawn: Callable[[], int] | None = None) -> int:
        """Units of the monthly generation quota used in the current period
        (`period` as for `windows`), read without drawing one (a cost preview);
        what PostgreSQL records (`drawn`) while Redis holds no counter, or one not yet checked against it."""
        month = f"p{period[0]}" if period else _month_bounds(self.clock())[0]
        key = f"rl:{{{subject}}}:{GENERATIONS}:{month}"
        try:
            used = self.redis.get(key)
            if drawn is not None and (used is None or self._checked.get(subject) != (key, self._server_id())):
                return max(int(used or 0), drawn())
            return int(used or 0)
        except redis.RedisError as exc:
            _warn.warning("fail-open", "rate limiter unavailable, quota use unknown: %s", exc)
            return 0

    # --- admission --------------------------------------------------------------

    def ask(self, subject: str, limits: Limits, *, cap: str = "", generation: bool = False, stream: bool = False,
            token: str = "", lease: bool = True, period: tuple[int, int] | None = None) -> Ask:
        now = self.clock()
        windows = self.windows(subject, limits, cap, generation, now, period)
        slots = self.slots(limits, generation, stream)
        # Calls holding a slot (generations, streams) are few and must be exact: never leased.
        want = self._lease_size(windows) if lease and not slots else 1
        keys = [w.key for w in windows] + [f"rl:{{{subject}}}:{slot.name}" for slot in slots]
        minute = windows[0]
        if self._lease_size([minute]) > 1:  # some call of this window may lease: report it per tick
            shown_key = f"rl:{{{subject}}}:reported:{minute.resets_at}"
            return Ask(now, limits, windows, slots, [*keys, shown_key], want, token, generation, shown_key,
                       int(now // REPORT_SECONDS))
        return Ask(now, limits, windows, slots, keys, want, token, generation)

    def admit(self, subject: str, limits: Limits, *, cap: str = "", generation: bool = False, stream: bool = False,
              token: str = "", period: tuple[int, int] | None = None, drawn: Callable[[], int] | None = None) -> Admission:
        """`drawn`: the generations PostgreSQL records in the quota's window (seeds a counter Redis lost)."""
        ask = self.ask(subject, limits, cap=cap, generation=generation, stream=stream, token=token, period=period)
        if generation:
            self._carry_quota(subject, ask.windows[-1], ask.now)
            if drawn is not None:
                self._check_against_records(subject, ask.windows[-1], ask.now, drawn)
        if ask.want > 1:
            leased = self._from_lease(ask)
            if leased is not None:
                return leased
        refused = self._refused.get(self._lease_key(ask))
        if refused is not None and refused[0] > self.monotonic() and refused[2] == ask.tick:
            return self.decide(ask, refused[1])  # raises the same 429, with Retry-After counted from now
        try:
            result = self._admit(keys=ask.keys, args=ask.script_args())
            if result[0] in (b"unseeded", "unseeded"):
                self._seed(ask.windows[-1], ask.now, drawn() if drawn is not None else 0)
                result = self._admit(keys=ask.keys, args=ask.script_args())
        except redis.RedisError as exc:
            _warn.warning("fail-open", "rate limiter unavailable, failing open: %s", exc)
            return Admission()
        if result[0] in (b"unseeded", "unseeded"):  # lost again at once (Redis flushed meanwhile): unlimited
            _warn.warning("unseeded", "the quota counter %s vanished while it was seeded", ask.windows[-1].key)
            return Admission()
        if result[0] in (b"window", "window"):
            self._remember_refusal(ask, result)
        return self.decide(ask, result)

    def _seed(self, month: Window, now: float, used: int) -> None:
        """A quota counter that is missing (a new window, or Redis lost it) starts from what
        PostgreSQL records; NX: a counter another process created meanwhile stands."""
        self.redis.set(month.key, used, nx=True, px=(month.resets_at - int(now) + 60) * 1000)

    def _check_against_records(self, subject: str, month: Window, now: float, drawn: Callable[[], int]) -> None:
        """Raise the quota counter to what PostgreSQL records if it is behind, once per organization and
        window in this process and Redis's lifetime (module docstring)."""
        try:
            server = self._server_id()
            if self._checked.get(subject) == (month.key, server):
                return
            self._catch_up(keys=[month.key], args=[drawn(), (month.resets_at - int(now) + 60) * 1000])
        except redis.RedisError as exc:
            _warn.warning("fail-open", "rate limiter unavailable, failing open: %s", exc)
            return
        if len(self._checked) >= 65_536:
            self._checked.clear()
        self._checked[subject] = (month.key, server)

    def _server_id(self) -> str:
        """Redis's run id, asked at most every SERVER_ID_SECONDS: a new one means a restart or a failover."""
        server, until = self._server
        if time.monotonic() >= until:
            server = str(self.redis.info("server")["run_id"])
            self._server = (server, time.monotonic() + SERVER_ID_SECONDS)
        return server

    def _carry_quota(self, subject: str, month: Window, now: float) -> None:
        """Carry the monthly quota's count into a window that replaced it before it reset (_CARRY),
        once per organization and window in this process (then the pointer says it is done)."""
        if self._quota_windows.get(subject) == month.key:
            return
        try:
            self._carry(keys=[f"rl:{{{subject}}}:generations:window", month.key],
                        args=[int(now), month.resets_at, (month.resets_at - int(now) + 60) * 1000])
        except redis.RedisError as exc:
            _warn.warning("fail-open", "rate limiter unavailable, failing open: %s", exc)
            return
        if len(self._quota_windows) >= 65_536:
            self._quota_windows.clear()
        self._quota_windows[subject] = month.key

    def _remember_refusal(self, ask: Ask, result: Reply) -> None:
        """A full window stays full until it resets (only a lease given back or
        a refunded generation frees a unit), so the next calls of the same
        windows are refused from memory for a second. Window keys name their
        period, so a new window never matches. Concurrency refusals are not
        remembered: a slot frees whenever a call ends."""
        now = self.monotonic()
        with self._lock:
            if len(self._refused) >= 4096:  # organizations over a limit at once; expired ones go first
                self._refused = {k: v for k, v in self._refused.items() if v[0] > now}
                if len(self._refused) >= 4096:
                    self._refused.clear()
            self._refused[self._lease_key(ask)] = (now + REFUSAL_MEMORY_SECONDS, result, ask.tick)

    def _forget_refusals(self, *window_keys: str) -> None:
        """Units came back to these windows (here; elsewhere, the memory lapses within a second)."""
        with self._lock:
            if self._refused:
                freed = set(window_keys)
                self._refused = {k: v for k, v in self._refused.items() if freed.isdisjoint(k[:-1])}

    def decide(self, ask: Ask, result: Reply) -> Admission:
        """The script's answer as an Admission (keeping a granted lease), or the 429 to raise."""
        verdict = result[0].decode() if isinstance(result[0], bytes) else result[0]
        windows, limits, now = ask.windows, ask.limits, ask.now
        minute = windows[0]
        shown = int(result[-1]) if ask.shown_key else None
        if verdict == "ok":
            granted, used_minute = int(result[1]), int(result[2])
            if granted > 1:
                self._keep(ask, _Lease(tuple(ask.window_keys), granted - 1, used_minute,
                                       self.monotonic() + LEASE_SECONDS, shown, ask.tick))
            used = shown if shown is not None else used_minute - granted + 1
            headers = self.headers(limits, minute, max(0, minute.limit - used), now)
            slot_keys = tuple(ask.keys[len(windows):len(windows) + len(ask.slots)])
            return Admission(headers, slot_keys, windows[-1].key if ask.generation else "", ask.token)
        minute_left = max(0, minute.limit - (shown if shown is not None else int(result[3])))
        if verdict == "concurrency":
            headers = self.headers(limits, minute, minute_left, now)
            slot = ask.slots[int(result[1]) - 1]
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

    # --- leases -------------------------------------------------------------------

    def _lease_size(self, windows: list[Window]) -> int:
        size = min(self.lease_max, *(w.limit // LEASE_DIVISOR for w in windows))
        return size if size > 1 else 1

    def _from_lease(self, ask: Ask) -> Admission | None:
        """A unit of this process's lease on the same windows, or None (ask Redis)."""
        key = self._lease_key(ask)
        with self._lock:
            lease = self._leases.get(key)
            if lease is None:
                return None
            if lease.left > 0 and lease.expires > self.monotonic() and lease.tick == ask.tick:
                lease.left -= 1
                # The tick's figure (every process reports it), else as far as this process knows.
                used = lease.shown if lease.shown is not None else lease.minute_used - lease.left
                minute = ask.windows[0]
                return Admission(self.headers(ask.limits, minute, max(0, minute.limit - used), ask.now))
            del self._leases[key]  # used up or expired
        if lease.left > 0:
            self._return(lease)
        return None

    @staticmethod
    def _lease_key(ask: Ask) -> tuple[object, ...]:
        # The limits belong to the key: after a plan change, calls never draw on a lease taken under the old limits.
        return (*ask.keys, ask.limits)

    def _keep(self, ask: Ask, lease: _Lease) -> None:
        key = self._lease_key(ask)
        with self._lock:
            replaced = self._leases.get(key)
            self._leases[key] = lease
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="rate-limit-leases", daemon=True)
                self._sweeper.start()
        if replaced is not None and replaced.left > 0:
            self._return(replaced)

    def _sweep(self) -> None:
        """Give back what idle leases did not use, so no window stays short for long."""
        while True:
            time.sleep(LEASE_SECONDS / 2)
            self.give_back(expired_only=True)

    def give_back(self, expired_only: bool = False) -> None:
        now = self.monotonic()
        with self._lock:
            done = [k for k, lease in self._leases.items() if not expired_only or lease.expires <= now]
            leases = [self._leases.pop(k) for k in done]
        for lease in leases:
            if lease.left > 0:
                self._return(lease)

    def _return(self, lease: _Lease) -> None:
        try:
            self._give_back(keys=list(lease.keys), args=[lease.left])
        except redis.RedisError as exc:
            _warn.warning("give-back", "could not give back %d leased units (they expire with the window): %s",
                          lease.left, exc)
        else:
            self._forget_refusals(*lease.keys)

    def admit_anonymous(self, client_ip: str | None) -> Admission:
        """Unauthenticated failures: a per-address minute window."""
        try:
            return self.admit(f"ip:{client_ip or 'unknown'}", ANONYMOUS_LIMITS)
        except RateLimited as err:
            err.details["limit"] = "anonymous"
            raise

    def peek_anonymous(self, client_ip: str | None) -> Admission:
        """The headers of a call that needs no credential (a probe, the docs,
        a signed URL): such calls count against no window (a load balancer's
        probes would use it up), so they report the client address's
        anonymous window, which failed credentials draw on, as it stands."""
        now = self.clock()
        minute = self._fixed(f"ip:{client_ip or 'unknown'}", "minute", ANONYMOUS_PER_MINUTE, 60, now)
        try:
            used = int(self.redis.get(minute.key) or 0)
        except redis.RedisError as exc:
            _warn.warning("fail-open", "rate limiter unavailable, failing open: %s", exc)
            return Admission()
        return Admission(self.headers(ANONYMOUS_LIMITS, minute, max(0, minute.limit - used), now))

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
            _warn.warning("release", "could not release a generation slot (it expires by itself): %s", exc)
        else:
            if refund and admission.refund_key:
                self._forget_refusals(admission.refund_key)

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
