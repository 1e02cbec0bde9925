"""The FastAPI peer of scripts/benchmark.py: GET /v1/chat/sessions/{id} doing
the server's per-request work, written as a good FastAPI service would be.

Per request, as the server does it: the API key found by the SHA-256 of the
secret (verified keys cached in-process for 30 s); the `chat:read` scope
checked; one Redis call running the server's own limiter script with the
server's keys and arguments (`RateLimiter.ask`/`decide`, one call per request:
the server's per-process leases are its own design, not the peer's); the row
read by one prepared statement; the same JSON (camelCase, the transcoder's
field formats) with the same rate-limit and request-id headers; one access
log line per request (the server's edge writes one too).

How it is built: uvicorn with uvloop and httptools, `workers=PEER_WORKERS`;
per worker one steady psycopg 3 async pool (min = max = PEER_POOL_SIZE, no
churn) whose statements are prepared on first use; autocommit (a single
SELECT needs no transaction); redis.asyncio with the script's SHA cached.

Run: DATABASE_URL=… REDIS_URL=… PEER_PORT=… [PEER_WORKERS=1] [PEER_POOL_SIZE=4] python scripts/bench_peer.py
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from datetime import UTC, datetime

import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.responses import Response
from persona_service.chat.tables import ChatSession
from persona_service.kernel.auth import hash_secret
from persona_service.kernel.db.engine import make_engine
from persona_service.kernel.limits.limiter import _SCRIPT, RateLimited, RateLimiter
from persona_service.kernel.limits.resolver import LimitsResolver
from persona_service.kernel.principal import Principal
from persona_service.orgs.keys_repository import _find_for_auth
from persona_service.registry import MODULES
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql

AUTH_CACHE_SECONDS = 30.0
SCOPE = "chat:read"
DATABASE_URL = os.environ["DATABASE_URL"]
REDIS_URL = os.environ["REDIS_URL"]
POOL_SIZE = int(os.environ.get("PEER_POOL_SIZE", "4"))


def _sql(statement) -> str:
    """The statement as psycopg's %(name)s SQL (compiled once, at import)."""
    return str(statement.compile(dialect=postgresql.psycopg.dialect()))


_sessions = ChatSession.__table__
GET_SESSION = _sql(select(_sessions).where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws")))
KEY_BY_HASH = _sql(_find_for_auth)


def _rfc3339(value: datetime) -> str:
    """A protobuf Timestamp's JSON form: UTC, 'Z', 0/3/6 fractional digits."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def _body(row: dict) -> bytes:
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


def _principal(row: dict) -> Principal:
    return Principal(
        kind="api_key", credential_id=row["id"], org_id=row["org_id"], workspace_id=row["workspace_id"],
        user_id=row["created_by_user_id"], scopes=frozenset(row["scopes"]), role=row["role"], plan=row["plan"],
        is_platform_admin=row["is_platform_admin"], ip_allowlist=tuple(row["ip_allowlist"] or ()),
        expires_at=row["expires_at"],
    )


def _error(status: int, code: str, message: str, headers=None) -> Response:
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}}, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json", headers=headers)


pool = AsyncConnectionPool(
    DATABASE_URL, min_size=POOL_SIZE, max_size=POOL_SIZE, open=False,
    kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
)
aredis = aioredis.Redis.from_url(REDIS_URL)
admit_script = aredis.register_script(_SCRIPT)
limiter = RateLimiter(aredis)  # ask() and decide() only: the call itself is awaited below
limits_resolver = LimitsResolver(make_engine(DATABASE_URL, pool_size=1), MODULES.limit_overrides)  # cached 10 s
_cache: dict[str, tuple[float, Principal]] = {}


@contextlib.asynccontextmanager
async def lifespan(_app: FastAPI):
    await pool.open(wait=True)
    yield
    await pool.close()


app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)


async def authenticate(authorization: str | None) -> Principal | None:
    if not authorization or not authorization.startswith("Bearer "):
        return None
    digest = hash_secret(authorization[7:].strip())
    hit = _cache.get(digest)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    async with pool.connection() as conn:
        row = await (await conn.execute(KEY_BY_HASH, {"secret_hash": digest})).fetchone()
    if row is None or row["revoked_at"] is not None:
        return None
    principal = _principal(row)
    _cache[digest] = (time.monotonic() + AUTH_CACHE_SECONDS, principal)
    return principal


@app.get("/v1/chat/sessions/{session_id}")
async def get_chat_session(session_id: str, request: Request) -> Response:
    principal = await authenticate(request.headers.get("authorization"))
    if principal is None:
        return _error(401, "unauthorized", "The API key is invalid or has been revoked.")
    request_id = "req_" + uuid.uuid4().hex
    ask = limiter.ask(principal.org_id, limits_resolver.limits(principal), token=request_id, lease=False)
    try:
        admission = limiter.decide(ask, await admit_script(keys=ask.keys, args=ask.script_args()))
    except RateLimited as err:
        return _error(429, "rate_limited", err.message, err.headers)
    headers = dict(admission.headers, **{"x-request-id": request_id})
    if SCOPE not in principal.scopes:
        return _error(403, "forbidden", "The credential is not allowed to do this.", headers)
    async with pool.connection() as conn:
        row = await (await conn.execute(GET_SESSION, {"id": session_id, "ws": principal.workspace_id})).fetchone()
    if row is None:
        return _error(404, "not_found", "The chat session does not exist.", headers)
    return Response(_body(row), media_type="application/json", headers=headers)


@app.get("/healthz")
async def healthz() -> Response:
    return Response(b"ok")


def main() -> None:
    import uvicorn

    workers = int(os.environ.get("PEER_WORKERS", "1"))
    print(f"peer: workers={workers} pool={POOL_SIZE} loop=uvloop http=httptools access_log=on", flush=True)
    uvicorn.run(
        "bench_peer:app", host="127.0.0.1", port=int(os.environ["PEER_PORT"]), workers=workers,
        loop="uvloop", http="httptools", log_level="info", access_log=True,
    )


if __name__ == "__main__":
    main()
