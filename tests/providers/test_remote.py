"""Model calls are never lost with a runner (providers/remote.py), on the stack's Redis, in a pool of the
tests' own (the stack's runner never takes their calls): a call taken by a runner that died before answering
is queued again and answered by another; a runner stopped (SIGTERM's close) answers the calls it took before
it returns."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from contextlib import contextmanager

import pytest
import redis
from persona_service.kernel import wakeups
from persona_service.kernel.models import NO_CALL, ModelCall, ModerationResult
from persona_service.providers import remote
from persona_service.providers.factory import make_base_provider

TIMEOUT_SECONDS = 30.0  # the server's wait for an answer: a lost call would take all of it
# A pool of these tests own: the stack's runner (another configuration's fingerprint) never takes their calls.
POOL = "tests-remote"
QUEUE = remote.queue_key(POOL)


class SlowModeration:
    """A model whose moderation takes `seconds` (`started` is set once one is under way, `finished` is when
    the last one returned)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Event()
        self.finished: float | None = None

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        self.started.set()
        time.sleep(self.seconds)  # the call under way while the runner stops: a duration by design
        self.finished = time.monotonic()
        return ModerationResult(flagged=False, categories=(), scores={}, matches=())


@pytest.fixture
def client(stack):
    """The stack's Redis, the tests' queue empty. The stack's runner reads only its own pool's queue (`POOL` is
    the tests'), so it runs on: it was once paused, and the tests slept a second for its read to end."""
    connection = redis.Redis.from_url(stack.redis_url)
    connection.delete(QUEUE)
    try:
        yield connection
    finally:
        connection.delete(QUEUE)


@contextmanager
def _server_waiting(client: redis.Redis, provider=None, moderate_call: ModelCall = NO_CALL):
    """A server's call of moderation, under way in a thread: its future."""
    bus = wakeups.Wakeups(client)
    caller = remote.RemoteProvider(provider or make_base_provider(), client, bus, TIMEOUT_SECONDS, POOL)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        yield pool.submit(caller.moderate, "hello there", call=moderate_call)


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
            # A bound with a margin for a loaded machine, below the server's wait (which a lost call takes).
            assert time.monotonic() - started < TIMEOUT_SECONDS - 10, "answered only once the server's wait ran out"
        finally:
            models.close()


def test_a_stopped_runner_answers_the_calls_it_took_before_it_returns(client):
    model = SlowModeration(3.0)
    models = remote.ModelCallServer(model, client, 1, POOL)  # type: ignore[arg-type]
    models.start()
    with _server_waiting(client) as answer:
        assert model.started.wait(10)
        models.close()  # mid-call (SIGTERM)
        closed = time.monotonic()
        # Answered by the time it returns: an order, not a speed (it was "read within 1 s").
        assert model.finished is not None and model.finished <= closed
        assert not answer.result(TIMEOUT_SECONDS).flagged


class Recording:
    """A model that keeps the `ModelCall` of each moderation it answers."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[ModelCall] = []

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        self.calls.append(call)
        return ModerationResult(flagged=False, categories=(), scores={}, matches=())


def test_a_queued_call_carries_the_model_call_its_caller_handed_to_the_runner(client):
    """The organization and weight (the runner's turns) and the run's attempt (an attempt-keyed model) travel
    with the call, as the caller handed them: no request is bound on this thread."""
    model, call = Recording(), ModelCall(org="org_tagged", weight=4, attempt=3)
    with _server_waiting(client, moderate_call=call) as answer:
        queued = _taken(client)  # a runner took it and died: the caller queues it again
        assert (queued["org"], queued["weight"], queued["attempt"]) == ("org_tagged", 4, 3)
        models = remote.ModelCallServer(model, client, 1, POOL)  # type: ignore[arg-type]
        models.start()
        try:
            assert not answer.result(TIMEOUT_SECONDS).flagged
        finally:
            models.close()
    assert {(c.org, c.weight, c.attempt) for c in model.calls} == {("org_tagged", 4, 3)}
