"""The FastAPI peer of scripts/benchmark.py: the same per-request work as
GET /v1/chat/sessions/{id} of the real server, in the leanest reasonable
FastAPI form, so the benchmark can report ratios measured side by side.

Per request: look up the API key by the SHA-256 of the secret (verified keys
cached in-process for 30 s, like the server), check the `chat:read` scope,
one Redis call for the rate limits (the server's own Lua script, keys and
arguments via persona_service.kernel.limits.limiter.RateLimiter and PLAN_LIMITS,
plus the Enterprise overrides cached 10 s, like the server), read the row
with one SQLAlchemy Core statement and answer the same JSON (camelCase, the
transcoder's field formats) with the same rate-limit headers.

Modes (PEER_MODE): `async` (default; `async def` endpoint, SQLAlchemy async
engine on psycopg 3, redis.asyncio) or `sync` (`def` endpoint in FastAPI's
thread pool, the server's sync engine, redis client and RateLimiter).

Run: DATABASE_URL=… REDIS_URL=… PEER_PORT=… python scripts/bench_peer.py
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from datetime import UTC, datetime

import redis
from fastapi import FastAPI, Request
from fastapi.responses import Response
from persona_service.chat.tables import ChatSession
from persona_service.kernel.db.engine import make_engine, sqlalchemy_url
from persona_service.kernel.limits.limiter import RateLimiter
from persona_service.kernel.limits.resolver import LimitsResolver
from persona_service.kernel.principal import Principal
from persona_service.orgs.keys_repository import _by_hash, _keys
from sqlalchemy import bindparam, select

AUTH_CACHE_SECONDS = 30.0
SCOPE = "chat:read"

_sessions = ChatSession.__table__
_get_session = select(_sessions).where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws"))
_key_by_hash = _by_hash.where(_keys.c.secret_hash == bindparam("h"))

MODE = os.environ.get("PEER_MODE", "async")
DATABASE_URL = os.environ["DATABASE_URL"]
REDIS_URL = os.environ["REDIS_URL"]
POOL_SIZE = int(os.environ.get("PEER_POOL_SIZE", "8"))


def _rfc3339(value: datetime) -> str:
    """A protobuf Timestamp's JSON form: UTC, 'Z', 0/3/6 fractional digits."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def _body(row) -> bytes:
    return json.dumps(
        {
            "sessionId": row["id"], "orgId": row["org_id"], "workspaceId": row["workspace_id"],
            "personaId": row["persona_id"], "userId": row["user_id"], "title": row["title"], "status": row["status"],
            "messageCount": row["message_count"], "inputTokens": row["input_tokens"],
            "outputTokens": row["output_tokens"], "costUsdMicros": row["cost_usd_micros"],
            "startedAt": _rfc3339(row["started_at"]), "lastActiveAt": _rfc3339(row["last_active_at"]),
            "endedAt": _rfc3339(row["ended_at"]) if row["ended_at"] is not None else None,
        },
        separators=(",", ":"),
    ).encode()


def _principal(row) -> Principal:
    return Principal(
        kind="api_key", credential_id=row["id"], org_id=row["org_id"], workspace_id=row["workspace_id"],
        user_id=row["created_by_user_id"], scopes=frozenset(row["scopes"]), role=row["role"], plan=row["plan"],
        is_platform_admin=row["is_platform_admin"], ip_allowlist=tuple(row["ip_allowlist"] or ()),
        expires_at=row["expires_at"],
    )


def _error(status: int, code: str, message: str, headers=None) -> Response:
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}}, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _bearer_hash(authorization: str | None) -> str | None:
    if not authorization or not authorization.startswith("Bearer "):
        return None
    return hashlib.sha256(authorization[7:].strip().encode()).hexdigest()


sync_engine = make_engine(DATABASE_URL, pool_size=2)  # limits overrides (cache misses only) and the sync mode
limits_resolver = LimitsResolver(sync_engine)
_cache: dict[str, tuple[float, Principal | None]] = {}

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

if MODE == "async":
    import redis.asyncio as aioredis
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(sqlalchemy_url(DATABASE_URL), pool_size=POOL_SIZE, max_overflow=POOL_SIZE)
    aredis = aioredis.Redis.from_url(REDIS_URL)

    class AsyncLimiter(RateLimiter):
        """RateLimiter's admission with an awaited script call: the same Lua
        script, keys and arguments (windows() and headers() are reused)."""

        async def admit_async(self, subject: str, limits) -> list[tuple[str, str]] | None:
            now = time.time()
            windows = self.windows(subject, limits, "", False, now)
            args = [int(now * 1000), len(windows)]
            for w in windows:
                args += [w.limit, (w.resets_at - int(now) + 60) * 1000]
            args += [0, "", 15 * 60 * 1000]
            result = await self._admit(keys=[w.key for w in windows] + [f"rl:{{{subject}}}:running"], args=args)
            if result[0] not in (b"ok", "ok"):
                return None
            minute = windows[0]
            return self.headers(limits, minute, max(0, minute.limit - int(result[2])), now)

    limiter = AsyncLimiter(aredis)

    async def _authenticate(authorization: str | None) -> Principal | None:
        digest = _bearer_hash(authorization)
        if digest is None:
            return None
        hit = _cache.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        async with engine.connect() as conn:
            row = (await conn.execute(_key_by_hash, {"h": digest})).mappings().first()
        principal = _principal(row) if row is not None and row["revoked_at"] is None else None
        if principal is not None:
            _cache[digest] = (time.monotonic() + AUTH_CACHE_SECONDS, principal)
        return principal

    @app.get("/v1/chat/sessions/{session_id}")
    async def get_chat_session(session_id: str, request: Request) -> Response:
        principal = await _authenticate(request.headers.get("authorization"))
        if principal is None:
            return _error(401, "unauthorized", "The API key is invalid or has been revoked.")
        headers = await limiter.admit_async(principal.org_id, limits_resolver.limits(principal))
        if headers is None:
            return _error(429, "rate_limited", "Too many requests.")
        headers.append(("x-request-id", uuid.uuid4().hex))
        if SCOPE not in principal.scopes:
            return _error(403, "forbidden", "The credential is not allowed to do this.", dict(headers))
        async with engine.connect() as conn:
            row = (await conn.execute(_get_session, {"id": session_id, "ws": principal.workspace_id})).mappings().first()
        if row is None:
            return _error(404, "not_found", "The chat session does not exist.", dict(headers))
        return Response(_body(row), media_type="application/json", headers=dict(headers))

elif MODE == "sync":
    from persona_service.kernel.limits.limiter import RateLimited

    engine = make_engine(DATABASE_URL, pool_size=POOL_SIZE)
    limiter = RateLimiter(redis.Redis.from_url(REDIS_URL))

    def _authenticate_sync(authorization: str | None) -> Principal | None:
        digest = _bearer_hash(authorization)
        if digest is None:
            return None
        hit = _cache.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        with engine.connect() as conn:
            row = conn.execute(_key_by_hash, {"h": digest}).mappings().first()
        principal = _principal(row) if row is not None and row["revoked_at"] is None else None
        if principal is not None:
            _cache[digest] = (time.monotonic() + AUTH_CACHE_SECONDS, principal)
        return principal

    @app.get("/v1/chat/sessions/{session_id}")
    def get_chat_session(session_id: str, request: Request) -> Response:
        principal = _authenticate_sync(request.headers.get("authorization"))
        if principal is None:
            return _error(401, "unauthorized", "The API key is invalid or has been revoked.")
        try:
            headers = limiter.admit(principal.org_id, limits_resolver.limits(principal)).headers
        except RateLimited:
            return _error(429, "rate_limited", "Too many requests.")
        headers.append(("x-request-id", uuid.uuid4().hex))
        if SCOPE not in principal.scopes:
            return _error(403, "forbidden", "The credential is not allowed to do this.", dict(headers))
        with engine.connect() as conn:
            row = conn.execute(_get_session, {"id": session_id, "ws": principal.workspace_id}).mappings().first()
        if row is None:
            return _error(404, "not_found", "The chat session does not exist.", dict(headers))
        return Response(_body(row), media_type="application/json", headers=dict(headers))

else:
    raise SystemExit(f"PEER_MODE must be async or sync, not {MODE!r}")


@app.get("/healthz")
async def healthz() -> Response:
    return Response(b"ok")


def main() -> None:
    import uvicorn

    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    try:
        import httptools  # noqa: F401

        http = "httptools"
    except ImportError:
        http = "h11"
    access_log = os.environ.get("PEER_ACCESS_LOG", "1") == "1"
    print(f"peer: mode={MODE} loop={loop} http={http} access_log={access_log}", flush=True)
    uvicorn.run(
        app, host="127.0.0.1", port=int(os.environ["PEER_PORT"]), workers=1, loop=loop, http=http,
        # One log line per request by default, as the server writes one (and Envoy its access log).
        log_level="info" if access_log else "warning", access_log=access_log,
    )


if __name__ == "__main__":
    main()
