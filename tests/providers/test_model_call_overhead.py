"""What a model call costs besides the model (providers/remote.py, issue 50): the answer reaches the waiting
server on its process's own inbox, with the answer in the message, so the server reads no Redis for it; a call
answered within a tick is never marked taken; one held longer is marked while it is held (a server waiting on
it sees a live runner, and does not queue it again). On the stack's Redis, in a pool of these tests' own."""

from __future__ import annotations

import concurrent.futures
import time

import pytest
import redis
from persona_service.kernel import wakeups
from persona_service.kernel.models import NO_CALL, GenerationOptions, Message, ModelCall, ModerationResult
from persona_service.providers import remote
from persona_service.providers.factory import in_process_calls, make_base_provider
from persona_service.providers.settings import ProviderSettings

POOL = "tests-overhead"
QUEUE = remote.queue_key(POOL)
TIMEOUT_SECONDS = 30.0


class Recording(redis.Redis):
    """A client that records the commands it sends (not those of its pipelines)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)


class MarkingServer(remote.ModelCallServer):
    """A runner that records the calls it marks taken."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.marked: list[str] = []

    def _mark(self, call_ids: list[str]) -> None:
        super()._mark(call_ids)
        self.marked += call_ids  # once the marks are in Redis: a test that sees them recorded finds them there


class HeldModeration:
    """A model whose moderation takes `seconds`."""

    name = "held"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        time.sleep(self.seconds)  # a call held across several ticks: a duration by design
        return ModerationResult(flagged=False, categories=(), scores={}, matches=())


@pytest.fixture
def url(stack):
    redis.Redis.from_url(stack.redis_url).delete(QUEUE)
    yield stack.redis_url
    redis.Redis.from_url(stack.redis_url).delete(QUEUE)


def _caller(url: str) -> tuple[remote.RemoteProvider, Recording]:
    client = Recording.from_url(url)
    bus = wakeups.Wakeups(redis.Redis.from_url(url))
    return remote.RemoteProvider(make_base_provider(), client, bus, TIMEOUT_SECONDS, POOL), client


def test_an_answer_reaches_its_server_without_a_read_and_a_quick_call_without_a_mark(url, monkeypatch):
    monkeypatch.setattr(wakeups, "FALLBACK_SECONDS", TIMEOUT_SECONDS)  # the server reads Redis only when woken
    runner = MarkingServer(make_base_provider(), redis.Redis.from_url(url), 1, POOL)
    runner.start()
    try:
        caller, client = _caller(url)
        caller.moderate("hello there")  # the subscriber's first subscription, then a call as every later one
        client.commands.clear()
        result = caller.moderate("hello again")
        assert not result.flagged
        assert client.commands == ["RPUSH"], "the answer was read from Redis, not taken from the inbox"
        assert runner.marked == []
    finally:
        runner.close()


def test_a_call_held_across_ticks_is_marked_while_held_and_not_queued_again(url):
    seconds = 20 * remote.TAKEN_RENEW_SECONDS  # held long enough to be seen marked on a loaded machine (6 ticks: once not)
    runner = MarkingServer(HeldModeration(seconds), redis.Redis.from_url(url), 1, POOL)  # type: ignore[arg-type]
    runner.start()
    try:
        caller, client = _caller(url)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(caller.moderate, "hello there")
            deadline = time.monotonic() + TIMEOUT_SECONDS
            while not runner.marked and time.monotonic() < deadline:
                time.sleep(0.05)  # polls what it observes, with a deadline
            assert runner.marked, "a held call was never marked taken"
            assert redis.Redis.from_url(url).exists(f"persona:model:taken:{runner.marked[0]}")
            assert not answer.result(TIMEOUT_SECONDS).flagged
        # Seen taken all along: the server never put it back on the queue.
        assert "LPUSH" not in client.commands
    finally:
        runner.close()


def test_the_offline_models_short_calls_are_answered_in_the_server(url):
    """No runner takes this pool's calls: a short completion, moderation and embeddings are answered on the
    calling thread with no Redis command; a text over the bound is queued for a runner (unary threads hold no long
    work), and a stream always is."""
    client = Recording.from_url(url)
    local = make_base_provider()
    caller = remote.RemoteProvider(local, client, wakeups.Wakeups(redis.Redis.from_url(url)), TIMEOUT_SECONDS, POOL,
                                   in_process_calls(ProviderSettings()))
    assert caller.moderate("build a bomb").flagged and caller.moderate("hello").flagged is False
    assert caller.embed(["hello there", "good night"]) == local.embed(["hello there", "good night"])
    chat = [Message("system", "You are a ferry pilot who sings."), Message("user", "How was the crossing?")]
    options = GenerationOptions(task="reply")
    assert caller.generate(chat, options) == local.generate(chat, options)
    assert client.commands == []
    long = "word " * (remote.IN_PROCESS_MAX_CHARS // 5 + 1)
    runner = remote.ModelCallServer(local, redis.Redis.from_url(url), 1, POOL)
    runner.start()
    try:
        assert caller.embed([long]) == local.embed([long])
        assert client.commands[0] == "RPUSH"  # queued (then a read: the inbox's first subscription)
        client.commands.clear()
        long_chat = [*chat, Message("user", long)]
        assert caller.generate(long_chat, options) == local.generate(long_chat, options)
        assert client.commands[0] == "RPUSH"
        client.commands.clear()
        assert list(caller.stream(chat, options)) == list(local.stream(chat, options))
        assert client.commands[0] == "RPUSH"  # a stream is a durable run's: never on the calling thread
    finally:
        runner.close()


def test_only_the_local_models_parts_are_answered_in_the_server():
    assert in_process_calls(ProviderSettings()) == {"generate", "moderate", "embed"}
    remote_moderation = ProviderSettings(provider="openai", openai_base_url="http://model.invalid/v1",
                                         moderation_provider="openai")
    assert in_process_calls(remote_moderation) == {"embed"}  # a real model's completions: on the runners
    assert in_process_calls(ProviderSettings(embedding_provider="openai", embedding_base_url="http://e.invalid/v1")) \
        == {"generate", "moderate"}
