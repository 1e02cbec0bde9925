"""A stack whose model provider is the OpenAI stub, shared by both SDKs'
suites (their provider retries and faults): it retries the provider 3 times
quickly, then answers 502; a delayed provider keeps a generation (and its
slot) open up to 10 s. Started once for the folder; each suite resets the
stub before it injects anything."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from providers.openai_stub import OpenAIStub
from support import Stack, TenantFactory, engine_for, make_stack, running


@pytest.fixture(scope="session")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture(scope="session")
def pstack(tmp_path_factory, stub) -> Iterator[Stack]:
    stack = make_stack(
        tmp_path_factory.mktemp("persona-sdk-stub"), workers=0,  # no webhook worker: the deliveries are the session stack's
        **stub.stack_env(PERSONA_PROVIDER_BACKOFF_SECONDS="0.01", PERSONA_PROVIDER_TIMEOUT_SECONDS="10"),
    )
    with running(stack):
        yield stack


@pytest.fixture(scope="session")
def ptenants(pstack) -> Iterator[TenantFactory]:
    with engine_for(pstack) as engine:
        yield TenantFactory(engine)
