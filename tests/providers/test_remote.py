"""Model calls are never lost with a runner (providers/remote.py), on the stack's Redis with its own runner
paused (SIGSTOP): a call taken by a runner that died before answering is queued again and answered by
another; a runner stopped (SIGTERM's close) answers the calls it took before it returns."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from contextlib import contextmanager

import pytest
import redis
from persona_service.kernel import wakeups
from persona_service.providers import remote
from persona_service.providers.base import ModerationResult
from persona_service.providers.factory import make_base_provider

TIMEOUT_SECONDS = 30.0  # the server's wait for an answer: a lost call would take all of it
# A pool of these tests own: the stack's runner (another configuration's fingerprint) never takes their calls.
POOL = "tests-remote"
QUEUE = remote.queue_key(POOL)


class SlowModeration:
    """A model whose moderation takes `seconds` (`started` is set once one is under way)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Event()

    def moderate(self, text: str) -> ModerationResult:
        self.started.set()
        time.sleep(self.seconds)
        return ModerationResult(flagged=False, categories=(), scores={}, matches=())


@pytest.fixture
def client(stack):
    """The stack's Redis, its runner paused (it takes no call of these tests) and the queue empty."""
    runner = stack.process("runner-0")
    connection = redis.Redis.from_url(stack.redis_url)
    os.kill(runner.pid, signal.SIGSTOP)
    # Its read of the queue in progress, Redis ends on its own (a second): until then it would be handed a call.
    time.sleep(1.5)
    try:
        connection.delete(QUEUE)
        yield connection
    finally:
        connection.delete(QUEUE)
        os.kill(runner.pid, signal.SIGCONT)


@contextmanager
def _server_waiting(client: redis.Redis, provider=None):
    """A server's call of moderation, under way in a thread: its future."""
    bus = wakeups.Wakeups(client)
    caller = remote.RemoteProvider(provider or make_base_provider(), client, bus, TIMEOUT_SECONDS, POOL)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        yield pool.submit(caller.moderate, "hello there")


def _taken(client: redis.Redis) -> dict:
    """The queued call a runner takes (as `ModelCallServer` does)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        taken = client.blpop([QUEUE], timeout=1)
        if taken is not None:
            return remote.json.loads(taken[1])
    raise AssertionError("no call was queued")


def test_a_call_whose_runner_died_with_it_is_queued_again_and_answered(client):
    with _server_waiting(client) as answer:
        call = _taken(client)  # a runner took it, marked it, and was killed before answering
        client.set(f"persona:model:taken:{call['id']}", 1, ex=1)
        models = remote.ModelCallServer(make_base_provider(), client, 1, POOL)
        models.start()
        try:
            started = time.monotonic()
            assert not answer.result(TIMEOUT_SECONDS).flagged
            assert time.monotonic() - started < 10, "answered only once the server's wait ran out"
        finally:
            models.close()


def test_a_stopped_runner_answers_the_calls_it_took_before_it_returns(client):
    model = SlowModeration(3.0)
    models = remote.ModelCallServer(model, client, 1, POOL)  # type: ignore[arg-type]
    models.start()
    with _server_waiting(client) as answer:
        assert model.started.wait(10)
        models.close()  # mid-call (SIGTERM)
        # Answered by the time it returns (the server's thread reads it at once), not seconds later.
        assert not answer.result(1.0).flagged
