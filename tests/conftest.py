"""Fixtures: the real stack (embedded PostgreSQL or DATABASE_URL, embedded
Redis or REDIS_URL, the gRPC server process and Envoy) started once per run
on free ports, exactly as `persona-service up` starts it. The schema comes
from the Alembic migrations the stack applies."""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from datetime import datetime

import grpc
import httpx
import pytest

from persona_service.config import Settings
from persona_service.db.engine import make_engine
from persona_service.domain.auth import Authenticator, CredentialCache
from persona_service.domain.keys import KeyService
from persona_service.domain.orgs import Onboarding
from persona_service.domain.principal import SCOPES
from persona_service.stack import Stack, free_port

JWT_SECRET = "test-jwt-secret-" + "x" * 32


def make_stack(data_dir: pathlib.Path, servers: int = 1, **extra_env) -> Stack:
    settings = Settings(
        data_dir=data_dir,
        database_url=os.environ.get("DATABASE_URL", ""),
        redis_url=os.environ.get("REDIS_URL", ""),
        http_port=free_port(),
        grpc_port=free_port(),
        admin_port=free_port(),
        jwt_secret=JWT_SECRET,
    )
    env = {"PERSONA_JWT_SECRET": JWT_SECRET, "PERSONA_GRPC_WORKERS": "8", **extra_env}
    ports = [settings.grpc_port] + [free_port() for _ in range(servers - 1)]
    return Stack(settings, grpc_ports=ports, extra_env=env)


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    stack = make_stack(tmp_path_factory.mktemp("persona"))
    try:
        stack.start()
    except Exception:
        stack.stop()
        raise
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def engine(stack):
    engine = make_engine(stack.database_url, pool_size=2)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def http(stack) -> httpx.Client:
    with httpx.Client(base_url=stack.http_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
def edge_channel(stack) -> grpc.Channel:
    """Native gRPC through Envoy's public port (h2c)."""
    with grpc.insecure_channel(f"127.0.0.1:{stack.settings.http_port}") as channel:
        yield channel


@pytest.fixture(scope="session")
def server_channel(stack) -> grpc.Channel:
    """Native gRPC straight to the server, as internal services call it."""
    with grpc.insecure_channel(f"127.0.0.1:{stack.grpc_ports[0]}") as channel:
        yield channel


@dataclass
class Tenant:
    org_id: str
    workspace_id: str
    user_id: str
    api_key: str
    plan: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.api_key}"),)


class TenantFactory:
    """Creates organizations and keys straight through the domain services,
    as `persona-service bootstrap` does."""

    def __init__(self, engine):
        self.engine = engine
        self.count = 0

    def __call__(self, plan: str = "pro", platform_admin: bool = False, region: str = "us") -> Tenant:
        self.count += 1
        with self.engine.begin() as conn:
            made = Onboarding(conn).create_org(
                f"Tenant {self.count} {os.getpid()}", plan=plan, region=region, platform_admin=platform_admin
            )
        key = self.key(made.org_id, made.workspace_id, made.user_id, plan, list(SCOPES))
        return Tenant(made.org_id, made.workspace_id, made.user_id, key, plan)

    def key(self, org_id, workspace_id, user_id, plan, scopes, expires_at: datetime | None = None, ip_allowlist=()):
        """A key written directly (expiry may be in the past, which the API refuses)."""
        with self.engine.begin() as conn:
            service = KeyService(conn)
            row, secret = service.create(
                None, org_id=org_id, workspace_id=workspace_id, user_id=user_id, plan=plan,
                name="fixture", scopes=scopes, ip_allowlist=list(ip_allowlist),
            )
            if expires_at is not None:
                from sqlalchemy import update

                from persona_service.db.models import ApiKey

                conn.execute(update(ApiKey).where(ApiKey.id == row["id"]).values(expires_at=expires_at))
        return secret

    def tenant_key(self, tenant: Tenant, scopes, **kw) -> str:
        return self.key(tenant.org_id, tenant.workspace_id, tenant.user_id, tenant.plan, scopes, **kw)


@pytest.fixture(scope="session")
def tenants(engine) -> TenantFactory:
    return TenantFactory(engine)


@pytest.fixture(scope="session")
def tenant(tenants) -> Tenant:
    return tenants()


@pytest.fixture(scope="session")
def jwt_minter() -> Authenticator:
    return Authenticator(JWT_SECRET, CredentialCache(0))


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict:
    """Assert the documented error envelope and return its `error` object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    assert "x-request-id" in response.headers
    return error
