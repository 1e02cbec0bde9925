"""Fixtures: the real stack (embedded PostgreSQL or DATABASE_URL, embedded
Redis or REDIS_URL, the gRPC server process and Envoy) started once per run
on free ports, exactly as `persona-service up` starts it. The schema comes
from the Alembic migrations the stack applies. Helpers live in support.py."""

from __future__ import annotations

import pathlib

import grpc
import httpx
import pytest
from persona_service.kernel.auth import Authenticator, CredentialCache
from support import JWT_SECRET, Stack, Tenant, TenantFactory, client_for, engine_for, make_stack, running


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """For `make pytest`'s workers (pytest-xdist, `--dist loadgroup`): a file's
    tests run on one worker, and so do a folder's whose conftest.py holds a
    session- or package-scoped fixture (a second stack, a browser, a seeded
    database), so each module- and folder-wide fixture starts once, not once
    a worker. Every worker is a session of its own: its own stack, ports from
    free_port and a basetemp subfolder."""
    if not config.getoption("loadgroup", False):  # what xdist sets in a worker of `--dist loadgroup`
        return
    root = pathlib.Path(__file__).parent.relative_to(config.rootpath).as_posix()
    for item in items:
        shared = [d.baseid for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs
                  if d.scope in ("session", "package") and d.baseid not in ("", root)]
        item.add_marker(pytest.mark.xdist_group(max(shared, key=len) if shared else item.nodeid.split("::")[0]))


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    with running(make_stack(tmp_path_factory.mktemp("persona"))) as stack:
        yield stack


@pytest.fixture(scope="session")
def engine(stack):
    with engine_for(stack) as engine:
        yield engine


@pytest.fixture(scope="session")
def http(stack) -> httpx.Client:
    with client_for(stack) as client:
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


@pytest.fixture(scope="session")
def tenants(engine) -> TenantFactory:
    return TenantFactory(engine)


@pytest.fixture(scope="session")
def tenant(tenants) -> Tenant:
    return tenants()


@pytest.fixture(scope="session")
def jwt_minter() -> Authenticator:
    return Authenticator(JWT_SECRET, CredentialCache(0))


