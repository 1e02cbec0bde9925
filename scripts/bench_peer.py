"""The peer of scripts/benchmark.py: GET /v1/chat/sessions/{id} with the
service's contract, as a competent Starlette engineer would ship it.

The contract, as Envoy answers it: the same JSON bytes (camelCase, the
transcoder's formats and escaping), the same X-RateLimit-*, RateLimit*,
X-Request-Id and X-Should-Retry headers, the same 401/403/404/429 envelopes.

Per request, as the service: the API key found by the SHA-256 of its secret
(principals cached in-process for 30 s; expiry, IP allowlist and the
`chat:read` scope checked by the service's own functions); the rate limits
with the service's semantics and Redis scripts (leases of up to 64 units per
worker, used for at most LEASE_SECONDS, the rest given back; limits under
2,000 per window never lease; failed credentials limited per address); the
org's plan limits (Enterprise overrides) read asynchronously and cached 10 s;
the row read by one prepared statement; one access line per request, buffered
and written once a second (Envoy's file logger flushes the same way).

How it is built: uvicorn with uvloop and httptools, `workers=PEER_WORKERS`;
per worker one asyncpg pool (min = max = PEER_POOL_SIZE, statements prepared
per connection, no reset query on release: nothing changes session state),
redis.asyncio with hiredis, orjson. Nothing blocks the event loop.
docs/benchmark.md lists every difference in work from the service.

Run: DATABASE_URL=… REDIS_URL=… PEER_PORT=… [PEER_WORKERS=1] [PEER_POOL_SIZE=4] python scripts/bench_peer.py
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import orjson
import redis.asyncio as aioredis
from persona_service.chat.module import MODULE as CHAT
from persona_service.chat.tables import ChatSession
from persona_service.config.repository import ORG_LEVEL
from persona_service.config.service import RATE_LIMIT_PREFIX
from persona_service.config.tables import ConfigItem
from persona_service.kernel.errors import ApiError, NotFound, Unauthorized
from persona_service.kernel.principal import Principal, with_implied
from persona_service.kernel.transport.access import authorize
from persona_service.kernel.transport.auth import _bearer, check_client_address, hash_secret
from persona_service.kernel.transport.limits.limiter import (
    _GIVE_BACK,
    _SCRIPT,
    LEASE_DIVISOR,
    LEASE_HEADROOM,
    LEASE_SECONDS,
)
from persona_service.kernel.transport.limits.plans import ANONYMOUS_PER_MINUTE, PLAN_LIMITS, Limits
from persona_service.kernel.transport.limits.resolver import CACHE_SECONDS as LIMITS_CACHE_SECONDS
from persona_service.orgs.credentials import OrgCredentialStore
from persona_service.orgs.keys_repository import _find_for_auth
from redis.exceptions import RedisError
from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

AUTH_CACHE_SECONDS = 30.0
LEASE_MAX = 64  # the service's RateLimiter default
SCOPE = "chat:read"
DATABASE_URL = os.environ["DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://")
REDIS_URL = os.environ["REDIS_URL"]
POOL_SIZE = int(os.environ.get("PEER_POOL_SIZE", "4"))
# The pipeline's rule: a caller's X-Request-Id is kept when it looks like one, else a uuid4.
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
SESSION_PREFIX = CHAT.id_prefixes["chat_session"] + "_"  # other ids are 404 without a query
ANONYMOUS = Limits(ANONYMOUS_PER_MINUTE, 10**9, 0, 1.0, 0)  # RateLimiter.admit_anonymous's limits


# --- SQL: the service's own statements, compiled once for asyncpg ($n parameters) ------------


class Query:
    def __init__(self, statement):
        compiled = statement.compile(dialect=asyncpg_dialect())
        self.sql = str(compiled)
        self.names = list(compiled.positiontup or ())
        self.fixed = compiled.params  # literal values the statement binds itself

    def args(self, **values) -> list:
        return [values[name] if name in values else self.fixed[name] for name in self.names]


_sessions = ChatSession.__table__
_items = ConfigItem.__table__
GET_SESSION = Query(select(_sessions).where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws")))
KEY_BY_HASH = Query(_find_for_auth)
# ConfigService.rate_limit_overrides: the org-level `api.rate_limit.*` items.
OVERRIDES = Query(select(_items.c.key, _items.c.value).where(
    _items.c.org_id == bindparam("org"), _items.c.workspace_id == ORG_LEVEL, _items.c.key.startswith(RATE_LIMIT_PREFIX)))


# --- JSON as the transcoder writes it --------------------------------------------------------

# What protobuf's JSON writer escapes beyond JSON's own (orjson escapes those alike): HTML-significant and
# invisible characters (protobuf's json/internal/writer.cc, MustEscape).
_PROTOBUF_ESCAPED = re.compile(
    "[<>\x7f-\x9f\xad\u0600-\u0603\u06dd\u070f\u17b4\u17b5\u200b-\u200f\u2028-\u202e\u2060-\u2064"
    "\u206a-\u206f\ufeff\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def _u_escape(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as protobuf writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _transcoder_json(value: dict) -> bytes:
    body = orjson.dumps(value)
    text = body.decode()
    return _PROTOBUF_ESCAPED.sub(_u_escape, text).encode() if _PROTOBUF_ESCAPED.search(text) else body


def _rfc3339(value: datetime) -> str:
    """A protobuf Timestamp's JSON form: UTC, 'Z', 0/3/6 fractional digits."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def session_json(row) -> bytes:
    return _transcoder_json({
        "sessionId": row["id"], "orgId": row["org_id"], "workspaceId": row["workspace_id"],
        "personaId": row["persona_id"], "userId": row["user_id"], "title": row["title"], "status": row["status"],
        "messageCount": row["message_count"], "inputTokens": row["input_tokens"],
        "outputTokens": row["output_tokens"], "costUsdMicros": row["cost_usd_micros"],
        "startedAt": _rfc3339(row["started_at"]), "lastActiveAt": _rfc3339(row["last_active_at"]),
        "endedAt": _rfc3339(row["ended_at"]) if row["ended_at"] is not None else None,
        "personaVersion": row["persona_version"] or 0,  # (not pinned: 0, as the service's ChatSession says)
        "unpricedReplies": row["unpriced_replies"],
    })


# --- rate limits: the service's semantics and scripts, async ---------------------------------

Headers = list[tuple[str, str]]


@dataclass(frozen=True)
class Window:
    name: str
    key: str
    limit: int
    seconds: int
    resets_at: int


@dataclass
class Lease:
    keys: list[str]
    left: int
    minute_used: int  # the minute window's count right after the reservation
    expires: float  # monotonic


def _window(subject: str, name: str, limit: int, seconds: int, now: float) -> Window:
    index = int(now // seconds)
    return Window(name, f"rl:{{{subject}}}:{name}:{index}", limit, seconds, (index + 1) * seconds)


def _headers(limits: Limits, minute: Window, remaining: int, now: float) -> Headers:
    return [
        ("x-ratelimit-limit", str(minute.limit)),
        ("x-ratelimit-remaining", str(remaining)),
        ("x-ratelimit-reset", str(minute.resets_at)),
        ("x-service-plan-window-seconds", str(minute.seconds)),
        ("ratelimit-policy", f'"minute";q={minute.limit};w=60, "day";q={limits.requests_per_day};w=86400'),
        ("ratelimit", f'"minute";r={remaining};t={max(0, math.ceil(minute.resets_at - now))}'),
    ]


class Limiter:
    """The minute and day windows of an organization (or an address), with
    the service's leases; one instance per worker, on its event loop."""

    def __init__(self, client: aioredis.Redis):
        self._admit = client.register_script(_SCRIPT)
        self._give_back = client.register_script(_GIVE_BACK)
        self._leases: dict[tuple, Lease] = {}

    async def admit(self, subject: str, limits: Limits, token: str) -> Headers:
        """The rate-limit headers, or raises the 429."""
        now = time.time()
        minute = _window(subject, "minute", limits.requests_per_minute, 60, now)
        windows = (minute, _window(subject, "day", limits.requests_per_day, 86_400, now))
        keys = [w.key for w in windows]
        want = min(LEASE_MAX, *(w.limit // LEASE_DIVISOR for w in windows))
        lease_key = (*keys, limits)  # a plan change never draws on a lease taken under the old limits
        if want > 1 and (lease := self._leases.get(lease_key)) is not None:
            if lease.left > 0 and lease.expires > time.monotonic():
                lease.left -= 1
                return _headers(limits, minute, max(0, minute.limit - (lease.minute_used - lease.left)), now)
            del self._leases[lease_key]
            await self._return(lease)
        args: list[int | str] = [int(now * 1000), len(windows), 0, token, max(1, want)]
        for w in windows:
            args += [w.limit, (w.resets_at - int(now) + 60) * 1000]
        try:
            result = await self._admit(keys=keys, args=[*args, LEASE_HEADROOM])
        except RedisError:
            return []  # fail open, as the service does
        if result[0] == b"ok":
            granted, used = int(result[1]), int(result[2])
            if granted > 1:
                replaced = self._leases.get(lease_key)
                self._leases[lease_key] = Lease(keys, granted - 1, used, time.monotonic() + LEASE_SECONDS)
                if replaced is not None:
                    await self._return(replaced)
            return _headers(limits, minute, max(0, minute.limit - used + granted - 1), now)
        blocked = windows[int(result[1]) - 1]
        retry_after = max(1, math.ceil(blocked.resets_at - now))
        err = ApiError(
            f"The {blocked.name} limit of {blocked.limit} requests is reached; retry in {retry_after} s.",
            {"retryAfter": retry_after, "limit": blocked.name, "limitValue": blocked.limit,
             "windowSeconds": blocked.seconds},
            code="rate_limited",
        )
        left = 0 if blocked is minute else max(0, minute.limit - int(result[3]))
        err.headers = dict(_headers(limits, minute, left, now)) | {"retry-after": str(retry_after)}
        raise err

    async def _return(self, lease: Lease) -> None:
        if lease.left > 0:
            with contextlib.suppress(RedisError):  # unreturned units expire with the window
                await self._give_back(keys=lease.keys, args=[lease.left])

    async def sweep(self) -> None:
        """Give back what idle leases did not use, so no window stays short for long."""
        while True:
            await asyncio.sleep(LEASE_SECONDS / 2)
            now = time.monotonic()
            expired = [self._leases.pop(k) for k, lease in list(self._leases.items()) if lease.expires <= now]
            for lease in expired:
                await self._return(lease)


# --- the worker's state ------------------------------------------------------------------------


class AccessLog:
    """One JSON line per request (Envoy's fields that apply), buffered and written once a second."""

    def __init__(self):
        self.lines: list[bytes] = []

    def add(self, request: Request, status: int, code: str, principal: Principal | None, request_id: str,
            started: float, sent: int) -> None:
        self.lines.append(orjson.dumps({
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"), "method": request.method,
            "path": request.url.path, "protocol": f"HTTP/{request.scope['http_version']}", "status": status,
            "code": code, "org": principal.org_id if principal else "",
            "workspace": principal.workspace_id if principal else "",
            "principal": principal.credential_id if principal else "", "bytes_sent": sent,
            "duration_ms": round((time.perf_counter() - started) * 1000), "request_id": request_id,
            "client": request.client.host if request.client else "",
        }, option=orjson.OPT_APPEND_NEWLINE))

    async def flush_every_second(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self.flush()

    async def flush(self) -> None:
        if self.lines:
            data, self.lines = b"".join(self.lines), []
            await asyncio.to_thread(os.write, sys.stdout.fileno(), data)


class Peer:
    def __init__(self, pool: asyncpg.Pool, client: aioredis.Redis):
        self.pool = pool
        self.limiter = Limiter(client)
        self.log = AccessLog()
        self._principals: dict[str, tuple[float, Principal]] = {}
        self._limits: dict[str, tuple[float, Limits]] = {}

    async def authenticate(self, authorization: str | None) -> Principal:
        """The kernel Authenticator's rules for API keys (session JWTs are not this benchmark's)."""
        token = _bearer(authorization)
        if not token.startswith(OrgCredentialStore.key_prefixes):
            raise Unauthorized("The bearer credential is not a valid API key or session token.")
        digest = hash_secret(token)
        hit = self._principals.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            principal = hit[1]
        else:
            row = await self.pool.fetchrow(KEY_BY_HASH.sql, *KEY_BY_HASH.args(secret_hash=digest))
            if row is None or row["revoked_at"] is not None:
                raise Unauthorized("The API key is invalid or has been revoked.")
            principal = Principal(
                kind="api_key", credential_id=row["id"], org_id=row["org_id"], workspace_id=row["workspace_id"],
                user_id=row["created_by_user_id"], scopes=with_implied(row["scopes"]), role=row["role"],
                plan=row["plan"], is_platform_admin=row["is_platform_admin"],
                ip_allowlist=tuple(row["ip_allowlist"] or ()), expires_at=row["expires_at"],
            )
            self._principals[digest] = (time.monotonic() + AUTH_CACHE_SECONDS, principal)
        if principal.expires_at is not None and principal.expires_at <= datetime.now(UTC):
            raise Unauthorized("The credential has expired.")
        return principal

    async def limits(self, principal: Principal) -> Limits:
        """The plan's limits; Enterprise with its overrides, cached as LimitsResolver does."""
        base = PLAN_LIMITS[principal.plan]
        if principal.plan != "enterprise":
            return base
        hit = self._limits.get(principal.org_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        rows = await self.pool.fetch(OVERRIDES.sql, *OVERRIDES.args(org=principal.org_id))
        limits = base.with_overrides({r["key"][len(RATE_LIMIT_PREFIX):]: r["value"] for r in rows})
        self._limits[principal.org_id] = (time.monotonic() + LIMITS_CACHE_SECONDS, limits)
        return limits

    async def get_chat_session(self, request: Request) -> Response:
        started = time.perf_counter()
        request_id = request.headers.get("x-request-id", "")
        if not REQUEST_ID.match(request_id):
            request_id = str(uuid.uuid4())
        headers: Headers = [("x-request-id", request_id)]
        principal: Principal | None = None
        client_ip = request.client.host if request.client else None
        try:
            try:
                principal = await self.authenticate(request.headers.get("authorization"))
            except Unauthorized:
                headers += await self.admit_anonymous(client_ip)
                raise
            headers += await self.limiter.admit(principal.org_id, await self.limits(principal), request_id)
            check_client_address(principal, client_ip)
            authorize(principal, scope=SCOPE, roles=(), platform_admin=False)
            session_id = request.path_params["session_id"]
            row = None
            if session_id.startswith(SESSION_PREFIX):
                row = await self.pool.fetchrow(GET_SESSION.sql, *GET_SESSION.args(id=session_id, ws=principal.workspace_id))
            if row is None:
                raise NotFound("chat session")
            response = Response(session_json(row), 200, dict(headers), "application/json")
            code = ""
        except ApiError as err:
            body = orjson.dumps({"error": {"code": err.code, "message": err.message, "details": err.details}})
            extra = {"x-should-retry": "true" if err.spec.retryable else "false", **dict(headers), **err.headers}
            response = Response(body, err.spec.http_status, extra, "application/json")
            code = err.code
        self.log.add(request, response.status_code, code, principal, request_id, started, len(response.body))
        return response

    async def admit_anonymous(self, client_ip: str | None) -> Headers:
        """Failed credentials: a per-address minute window, as the service limits them."""
        try:
            return await self.limiter.admit(f"ip:{client_ip or 'unknown'}", ANONYMOUS, "")
        except ApiError as err:
            err.details["limit"] = "anonymous"
            raise


async def _json_codec(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", schema="pg_catalog", encoder=lambda v: orjson.dumps(v).decode(),
                              decoder=orjson.loads)


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """Release without a reset query: the peer never changes session state (the service's pool does not reset either)."""


peer: Peer | None = None


async def get_chat_session(request: Request) -> Response:
    assert peer is not None
    return await peer.get_chat_session(request)


async def healthz(_request: Request) -> Response:
    return Response(b"ok")


@contextlib.asynccontextmanager
async def lifespan(_app: Starlette):
    global peer
    pool = await asyncpg.create_pool(DATABASE_URL, min_size=POOL_SIZE, max_size=POOL_SIZE, init=_json_codec,
                                     reset=_no_reset)
    client = aioredis.Redis.from_url(REDIS_URL)
    peer = Peer(pool, client)
    tasks = [asyncio.create_task(peer.limiter.sweep()), asyncio.create_task(peer.log.flush_every_second())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await peer.log.flush()
        await client.aclose()
        await pool.close()


app = Starlette(routes=[Route("/v1/chat/sessions/{session_id}", get_chat_session), Route("/healthz", healthz)],
                lifespan=lifespan)


def main() -> None:
    import uvicorn

    workers = int(os.environ.get("PEER_WORKERS", "1"))
    print(f"peer: workers={workers} pool={POOL_SIZE} loop=uvloop http=httptools access_log=app", flush=True)
    uvicorn.run(
        "bench_peer:app", host="127.0.0.1", port=int(os.environ["PEER_PORT"]), workers=workers,
        loop="uvloop", http="httptools", log_level="warning", access_log=False, server_header=False,
    )


if __name__ == "__main__":
    main()
