"""The same-work floor, for scripts/benchmark.py's `samework` run (issue #37).

A minimal grpcio sync server doing exactly the hot read's work
(`GET /v1/chat/sessions/{id}`, persona.v1.ChatService/GetChatSession),
written plainly, behind the service's own rendered Envoy (bench_floor's
edge): what the service's hot read would cost without the generic pipeline.
Per call, as the service does it:

- the API key found by the SHA-256 of its secret, the principal cached
  in-process for 30 s (the credential store's own statement on a miss),
  expiry, the client address allowlist and the `chat:read` scope checked by
  the service's own functions;
- the organization's limits (Enterprise overrides read and cached 10 s) and
  the service's RateLimiter: the same Redis script, keys and leases;
- the session read by the repository's statement, prepared, on a pooled
  autocommit psycopg connection;
- the same answer (the servicer's message) and success headers (the request
  id, the rate-limit headers as initial metadata, sent in the answer's batch
  as the service sends them: kernel.transport.initial_metadata; the edge's
  Lua adds the rest).

Failures answer the nearest gRPC status with the service's envelope
carriers (the benchmark only measures the success path; tests/scripts
compare the success answer and headers byte for byte).

    python scripts/bench_samework.py PORT STREAM_PORT THREADS   # one server (DATABASE_URL, REDIS_URL)
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import redis
from bench_floor import Floor, serve_chat
from persona.v1 import chat_pb2, chat_pb2_grpc
from persona_service.chat.module import MODULE as CHAT
from persona_service.chat.servicer import chat_session
from persona_service.chat.tables import ChatSession
from persona_service.config.repository import ORG_LEVEL
from persona_service.config.service import RATE_LIMIT_PREFIX
from persona_service.config.tables import ConfigItem
from persona_service.kernel.errors import ApiError, NotFound, Unauthorized
from persona_service.kernel.principal import Principal, with_implied
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.access import authorize
from persona_service.kernel.transport.auth import _bearer, check_client_address, hash_secret
from persona_service.kernel.transport.errors import abort
from persona_service.kernel.transport.initial_metadata import attach
from persona_service.kernel.transport.limits.limiter import RateLimiter
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS, Limits
from persona_service.kernel.transport.limits.resolver import CACHE_SECONDS as LIMITS_CACHE_SECONDS
from persona_service.kernel.transport.stages.call import EDGE_MARK
from persona_service.kernel.transport.stages.client_address import ClientAddress
from persona_service.orgs.credentials import OrgCredentialStore
from persona_service.orgs.keys_repository import _find_for_auth
from persona_service.process.edge import EDGE_SECRET_ENV
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from sqlalchemy import bindparam, select
from sqlalchemy.dialects.postgresql.psycopg import dialect as psycopg_dialect

AUTH_CACHE_SECONDS = 30.0
SCOPE = "chat:read"
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")  # the pipeline's rule for a caller's X-Request-Id
SESSION_PREFIX = CHAT.id_prefixes["chat_session"] + "_"


class Query:
    """One of the service's statements, compiled once for psycopg (named parameters)."""

    def __init__(self, statement: Any) -> None:
        compiled = statement.compile(dialect=psycopg_dialect())
        self.sql = str(compiled)
        self.fixed = dict(compiled.params)

    def run(self, pool: ConnectionPool, **values: Any) -> list[dict[str, Any]]:
        with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(self.sql, self.fixed | values, prepare=True).fetchall()


_sessions = ChatSession.__table__
_items = ConfigItem.__table__
GET_SESSION = Query(select(_sessions).where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws")))
KEY_BY_HASH = Query(_find_for_auth)
OVERRIDES = Query(select(_items.c.key, _items.c.value).where(
    _items.c.org_id == bindparam("org"), _items.c.workspace_id == ORG_LEVEL, _items.c.key.startswith(RATE_LIMIT_PREFIX)))


class _Row:
    """A row's columns as attributes (what the servicer's converter reads)."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.__dict__.update(row)


class SameWorkChat(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, pool: ConnectionPool, limiter: RateLimiter, cap: str, client_ip: ClientAddress) -> None:
        self.pool, self.limiter, self.cap, self.client_ip = pool, limiter, cap, client_ip
        self._principals: dict[str, tuple[float, Principal]] = {}
        self._limits: dict[str, tuple[float, Limits]] = {}

    def authenticate(self, authorization: str | None) -> Principal:
        token = _bearer(authorization)
        if not token.startswith(OrgCredentialStore.key_prefixes):
            raise Unauthorized("The bearer credential is not a valid API key or session token.")
        digest = hash_secret(token)
        hit = self._principals.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            principal = hit[1]
        else:
            rows = KEY_BY_HASH.run(self.pool, secret_hash=digest)
            if not rows or rows[0]["revoked_at"] is not None:
                raise Unauthorized("The API key is invalid or has been revoked.")
            row = rows[0]
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

    def limits(self, principal: Principal) -> Limits:
        base = PLAN_LIMITS[principal.plan]
        if principal.plan != "enterprise":
            return base
        hit = self._limits.get(principal.org_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        rows = OVERRIDES.run(self.pool, org=principal.org_id)
        limits = base.with_overrides({r["key"][len(RATE_LIMIT_PREFIX):]: r["value"] for r in rows})
        self._limits[principal.org_id] = (time.monotonic() + LIMITS_CACHE_SECONDS, limits)
        return limits

    def GetChatSession(self, request: chat_pb2.GetChatSessionRequest,  # noqa: N802 - the RPC's name
                       context: grpc.ServicerContext) -> chat_pb2.ChatSession:
        metadata = dict(context.invocation_metadata())
        request_id = str(metadata.get("x-request-id", ""))
        if not REQUEST_ID.match(request_id):
            request_id = str(uuid.uuid4())
        headers = [("x-request-id", request_id)]
        try:
            principal = self.authenticate(str(metadata.get("authorization", "")))
            admission = self.limiter.admit(principal.org_id, self.limits(principal), cap=self.cap, token=request_id)
            headers += admission.headers
            check_client_address(principal, self.client_ip(context.peer(), metadata))
            authorize(principal, scope=SCOPE, roles=(), platform_admin=False)
            rows = GET_SESSION.run(self.pool, id=request.id, ws=principal.workspace_id) \
                if request.id.startswith(SESSION_PREFIX) else []
            if not rows:
                raise NotFound("chat session")
        except ApiError as err:
            abort(context, err, headers, json_edge=EDGE_MARK in metadata)
        attach(context, headers)  # in the answer's own batch, as the service sends it (not a batch of its own)
        return chat_session(_Row(rows[0]))  # type: ignore[arg-type]


def serve(port: int, stream_port: int, threads: int) -> None:
    """The unary port answers the RPC; both answer health (Envoy probes the stream port)."""
    from persona_service.kernel.transport.policy import find_services, method_table

    policy = method_table(find_services(["persona.v1.ChatService"]))["/persona.v1.ChatService/GetChatSession"].policy
    pool = ConnectionPool(os.environ["DATABASE_URL"].replace("postgresql+psycopg://", "postgresql://"),
                          min_size=threads, max_size=threads, kwargs={"autocommit": True, "prepare_threshold": 0})
    limiter = RateLimiter(redis.Redis.from_url(os.environ["REDIS_URL"]))
    client_ip = ClientAddress(Settings().trusted_proxies, os.environ[EDGE_SECRET_ENV])
    chat = SameWorkChat(pool, limiter, policy.endpoint_cap, client_ip)
    serve_chat(chat, port, stream_port, threads)


def same_work(n: int, data: pathlib.Path, database_url: str, redis_url: str) -> Floor:
    """N same-work servers on the stack's PostgreSQL and Redis, behind the service's edge."""

    def spawn(port: int, stream_port: int, threads: int, edge_secret: str) -> subprocess.Popen:
        env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, EDGE_SECRET_ENV: edge_secret,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(pathlib.Path(__file__).parent),
                                                           os.environ.get("PYTHONPATH", "")]))}
        return subprocess.Popen([sys.executable, __file__, str(port), str(stream_port), str(threads)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)

    return Floor(n, None, data, spawn)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
