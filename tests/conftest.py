"""Fixtures: the real stack (embedded PostgreSQL or DATABASE_URL, embedded
Redis or REDIS_URL, the gRPC server process and Envoy) started once per run
on free ports, exactly as `persona-service up` starts it. The schema comes
from the Alembic migrations the stack applies. Helpers live in support.py."""

from __future__ import annotations

import collections
import functools
import pathlib
import re

import grpc
import httpx
import pytest
from persona_service.kernel.data import boundaries
from persona_service.kernel.transport.auth import Authenticator, CredentialCache
from scheduling import expected_seconds, measured_seconds
from support import (
    JWT_SECRET,
    Stack,
    Tenant,
    TenantFactory,
    client_for,
    engine_for,
    make_stack,
    running,
    stop_process_template,
)

# Fails a run that loses tests: duplicated node ids, or fewer results than tests collected (tests/complete_run.py).
pytest_plugins = ["complete_run"]


def pytest_xdist_make_scheduler(config, log):
    """`make pytest`'s workers (pytest-xdist, `--dist loadscope`): a file's tests
    run on one worker, and so do a folder's whose conftest.py holds a session-
    or package-scoped fixture (a second stack, a browser, a seeded database),
    so each module- and folder-wide fixture starts once, not once a worker.
    Each worker is a session of its own: its stack, ports from free_port, a
    basetemp subfolder. (xdist's `loadgroup` marks do not group under pytest 9.)"""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFileOrSharedFolder(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return next((f for f in _sharing_folders(config.rootpath) if path.startswith(f + "/")), path)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the longest scopes first, so that none starts last and runs on alone
                self.ordered = True
                known = measured_seconds()
                self.workqueue = collections.OrderedDict(sorted(
                    self.workqueue.items(), key=lambda item: -expected_seconds(known, item[0], len(item[1]))))
            super()._assign_work_unit(node)

    return ByFileOrSharedFolder(config, log)




@functools.cache
def _sharing_folders(root: pathlib.Path) -> frozenset[str]:
    """Folders under tests/ whose conftest.py declares a session- or package-scoped fixture."""
    here = pathlib.Path(__file__).parent
    return frozenset(
        conftest.parent.relative_to(root).as_posix() for conftest in here.glob("*/**/conftest.py")
        if re.search(r"scope=\"(session|package)\"", conftest.read_text())
    )


@pytest.fixture(scope="session", autouse=True)
def _boundary_guard_from_the_start():
    """The boundary guard on in this process from the session's start, as in the stacks: what a test runs of a
    domain's code in-process is checked whatever ran before it on its worker (it came on with the worker's first
    stack before, so whether a test's own domain code was checked depended on the order xdist gave it)."""
    boundaries.guarding(True)


@pytest.fixture(autouse=True)
def _boundary_guard_left_whole(request):
    """A test leaves the guard as it found it, for the tests after it on its worker:
    - on (`was = guarding(False) ... guarding(was)`), else they run unchecked;
    - with a catalogue that holds nothing its database does not (boundaries.phantoms_where_read, after a test
      that read it): a view, trigger, rule or function a transaction made and rolled back, or a session took
      with it, judged a later test's statement once (5fbe1a7's CI failure, order-dependent)."""
    reads = boundaries.catalogue_reads()
    yield
    assert boundaries.is_on(), f"{request.node.nodeid} left the boundary guard off for the tests after it"
    if boundaries.catalogue_reads() != reads:
        assert boundaries.phantoms_where_read() == [], "the guard's catalogue outlived what it read"


@pytest.fixture(scope="session", autouse=True)
def _process_template():
    """Set up before, so torn down after, every stack of the session: the template (support.process_template)
    stops once they have."""
    yield
    stop_process_template()


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    with running(make_stack(tmp_path_factory.mktemp("persona"), stream_servers=1)) as stack:
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
