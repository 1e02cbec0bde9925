"""What a provider's embeddings are a function of (kernel.models.embedding_identity), which caches of values derived
from them key on (chat.service.Calibrations): the embeddings part's model and where it runs, through every wrapper,
never the chat part's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from persona_service.kernel.models import embedding_identity
from persona_service.providers.attempt_keyed import AttemptKeyed
from persona_service.providers.composed import Composed
from persona_service.providers.local import LocalProvider
from persona_service.providers.openai_http import OpenAIHTTPProvider
from persona_service.providers.remote import RemoteProvider
from persona_service.providers.retrying import Retrying


@pytest.fixture
def http() -> Iterator[OpenAIHTTPProvider]:
    provider = OpenAIHTTPProvider(base_url="http://models.invalid/v1/", embedding_model="embed-a")
    yield provider
    provider.close()


def test_each_model_and_server_has_its_own(http):
    assert embedding_identity(LocalProvider()) == "local/256"
    assert embedding_identity(LocalProvider(embedding_dims=128)) == "local/128"
    assert embedding_identity(http) == "openai/http://models.invalid/v1/embed-a"
    other = OpenAIHTTPProvider(base_url="http://elsewhere.invalid/v1", embedding_model="embed-a")
    try:
        assert embedding_identity(other) not in (embedding_identity(http), None)
    finally:
        other.close()


def test_composed_answers_its_embeddings_part_through_the_wrappers(http):
    local = LocalProvider()
    chat_remote = Composed(http, local, local)
    embeddings_remote = Composed(local, local, http)
    server = RemoteProvider(AttemptKeyed(chat_remote), client=None, bus=None, timeout_seconds=1,  # type: ignore[arg-type]
                            pool="p")
    assert embedding_identity(Retrying(server)) == "local/256"
    assert embedding_identity(Retrying(AttemptKeyed(embeddings_remote))) == embedding_identity(http)


def test_none_where_the_provider_does_not_say():
    class Plain:
        name = "plain"

    assert embedding_identity(Plain()) is None  # type: ignore[arg-type]
