"""Webhook fixtures: a real receiver on 127.0.0.1, and a second stack with no
worker process, for tests that drive the worker in-process with an
injected clock (or run and kill worker processes themselves)."""

from __future__ import annotations

import pytest
from support import TenantFactory, engine_for, make_stack, running
from wh_receiver import Receiver


@pytest.fixture(scope="session")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="session")
def quiet_stack(tmp_path_factory):
    stack = make_stack(tmp_path_factory.mktemp("persona-quiet"), PERSONA_WEBHOOKS_ALLOW_PRIVATE="1")
    stack.workers = 0
    with running(stack):
        yield stack


@pytest.fixture(scope="session")
def quiet_engine(quiet_stack):
    with engine_for(quiet_stack, pool_size=8) as engine:
        yield engine


@pytest.fixture(scope="session")
def quiet_tenants(quiet_engine) -> TenantFactory:
    return TenantFactory(quiet_engine)
