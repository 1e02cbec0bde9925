"""Retrying: 3 retries after 1 s, 2 s and 4 s (sleep injected), failures
reported for the audit log, streams retried only before their first delta."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    Message,
    ModelCall,
    ModerationResult,
    ProviderError,
    ProviderTimeout,
)
from persona_service.providers.local import LocalProvider
from persona_service.providers.retrying import Retrying

MESSAGES = [Message("system", "You are Ada Quill."), Message("user", "hello")]
OPTIONS = GenerationOptions()


def upstream_error(n: int, status: int = 500) -> ProviderError:
    return ProviderError("fake", f"attempt {n}", {"error": {"message": f"failure {n}", "type": "server_error"}}, status)


class Flaky:
    """Fails the first `fail` calls of every operation, then delegates to LocalProvider."""

    name = "fake"

    def __init__(self, fail: int, error=upstream_error, fail_stream_after: int | None = None):
        self.fail = fail
        self.error = error
        self.fail_stream_after = fail_stream_after
        self.calls: dict[str, int] = {}
        self.local = LocalProvider()
        self.model = "fake-model"

    def _attempt(self, operation: str) -> None:
        n = self.calls[operation] = self.calls.get(operation, 0) + 1
        if n <= self.fail:
            raise self.error(n)

    def generate(self, messages, options, *, call=NO_CALL) -> Completion:
        self._attempt("generate")
        return self.local.generate(messages, options, call=call)

    def moderate(self, text, *, call=NO_CALL) -> ModerationResult:
        self._attempt("moderate")
        return self.local.moderate(text, call=call)

    def embed(self, texts, *, call=NO_CALL) -> list[list[float]]:
        self._attempt("embed")
        return self.local.embed(texts, call=call)

    def stream(self, messages, options, *, call=NO_CALL) -> Iterator[Delta]:
        self._attempt("stream")
        for i, delta in enumerate(self.local.stream(messages, options, call=call)):
            if self.fail_stream_after is not None and i == self.fail_stream_after:
                raise upstream_error(99, 502)
            yield delta


@pytest.fixture
def slept() -> list[float]:
    return []


def test_default_delays_are_the_spec():
    assert Retrying(LocalProvider()).delays == (1.0, 2.0, 4.0)


def test_success_after_transient_failures(slept):
    flaky = Flaky(fail=2)
    retrying = Retrying(flaky, sleep=slept.append)
    completion = retrying.generate(MESSAGES, OPTIONS)
    assert completion == LocalProvider().generate(MESSAGES, OPTIONS)
    assert slept == [1.0, 2.0]
    assert flaky.calls["generate"] == 3
    assert [f.upstream["error"]["message"] for f in retrying.failures] == ["failure 1", "failure 2"]


def test_gives_up_after_three_retries_with_1_2_4(slept):
    flaky = Flaky(fail=10)
    seen = []
    retrying = Retrying(flaky, sleep=slept.append, on_failure=lambda e, attempt, op: seen.append((attempt, op)))
    with pytest.raises(ProviderError) as caught:
        retrying.generate(MESSAGES, OPTIONS)
    assert slept == [1.0, 2.0, 4.0]
    assert flaky.calls["generate"] == 4
    assert caught.value.upstream["error"]["message"] == "failure 4"  # the last error is re-raised
    assert [f.upstream["error"]["message"] for f in retrying.failures] == [f"failure {n}" for n in (1, 2, 3, 4)]
    assert caught.value.failures == retrying.failures
    assert seen == [(1, "generate"), (2, "generate"), (3, "generate"), (4, "generate")]


@pytest.mark.parametrize("operation, call", [
    ("moderate", lambda p: p.moderate("hello")),
    ("embed", lambda p: p.embed(["hello"])),
])
def test_moderate_and_embed_are_retried(slept, operation, call):
    flaky = Flaky(fail=3)
    retrying = Retrying(flaky, sleep=slept.append)
    assert call(retrying) == call(LocalProvider())
    assert slept == [1.0, 2.0, 4.0] and flaky.calls[operation] == 4 and len(retrying.failures) == 3


def test_timeouts_are_retried(slept):
    flaky = Flaky(fail=1, error=lambda n: ProviderTimeout("fake", "slow", {"error": "timeout"}))
    retrying = Retrying(flaky, sleep=slept.append)
    retrying.embed(["x"])
    assert slept == [1.0] and isinstance(retrying.failures[0], ProviderTimeout)


def test_custom_delays(slept):
    retrying = Retrying(Flaky(fail=5), delays=(0.5, 0.5), sleep=slept.append)
    with pytest.raises(ProviderError):
        retrying.embed(["x"])
    assert slept == [0.5, 0.5] and len(retrying.failures) == 3


@pytest.mark.parametrize("status, retried", [(400, False), (401, False), (404, False), (429, True), (408, True),
                                             (500, True), (503, True), (None, True)])
def test_client_errors_are_not_retried(slept, status, retried):
    flaky = Flaky(fail=1, error=lambda n: upstream_error(n, status))
    retrying = Retrying(flaky, sleep=slept.append)
    if retried:
        retrying.moderate("x")
        assert slept == [1.0]
    else:
        with pytest.raises(ProviderError):
            retrying.moderate("x")
        assert slept == [] and len(retrying.failures) == 1
    everything = Retrying(Flaky(fail=1, error=lambda n: upstream_error(n, status)), sleep=lambda s: None,
                          retry_client_errors=True)
    everything.moderate("x")
    assert len(everything.failures) == 1


def test_other_exceptions_are_not_retried(slept):
    retrying = Retrying(Flaky(fail=1, error=lambda n: RuntimeError("bug")), sleep=slept.append)
    with pytest.raises(RuntimeError):
        retrying.generate(MESSAGES, OPTIONS)
    assert slept == []


def test_failures_are_reset_per_call(slept):
    flaky = Flaky(fail=1)
    retrying = Retrying(flaky, sleep=slept.append)
    retrying.generate(MESSAGES, OPTIONS)
    assert len(retrying.failures) == 1
    retrying.generate(MESSAGES, OPTIONS)
    assert retrying.failures == []


def test_failures_are_per_thread():
    barrier = threading.Barrier(2)
    retrying = Retrying(Flaky(fail=0), sleep=lambda s: barrier.wait(timeout=5))
    results = {}

    class PerThread(Flaky):
        def _attempt(self, operation):
            if threading.current_thread().name == "failing" and not results.get("failed"):
                results["failed"] = True
                raise upstream_error(1)
            if threading.current_thread().name == "clean":
                barrier.wait(timeout=5)

    retrying.provider = PerThread(fail=0)

    def run(name):
        retrying.embed(["x"])
        results[name] = list(retrying.failures)

    threads = [threading.Thread(target=run, args=(n,), name=n) for n in ("failing", "clean")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(results["failing"]) == 1 and results["clean"] == []


def test_stream_retries_before_the_first_delta(slept):
    flaky = Flaky(fail=2)
    retrying = Retrying(flaky, sleep=slept.append)
    deltas = list(retrying.stream(MESSAGES, OPTIONS))
    assert deltas == list(LocalProvider().stream(MESSAGES, OPTIONS))
    assert slept == [1.0, 2.0] and len(retrying.failures) == 2


def test_stream_is_lazy_like_any_generator(slept):
    flaky = Flaky(fail=0)
    stream = Retrying(flaky, sleep=slept.append).stream(MESSAGES, OPTIONS)
    assert flaky.calls == {}
    next(stream)
    assert flaky.calls == {"stream": 1}


def test_stream_failure_after_the_first_delta_is_not_retried(slept):
    flaky = Flaky(fail=0, fail_stream_after=2)
    seen = []
    retrying = Retrying(flaky, sleep=slept.append, on_failure=lambda e, a, op: seen.append(op))
    received = []
    with pytest.raises(ProviderError) as caught:
        for delta in retrying.stream(MESSAGES, OPTIONS):
            received.append(delta)
    assert len(received) == 2 and slept == [] and flaky.calls["stream"] == 1
    assert caught.value.upstream_status == 502 and retrying.failures == [caught.value] and seen == ["stream"]


def test_stream_gives_up_after_three_retries(slept):
    retrying = Retrying(Flaky(fail=9), sleep=slept.append)
    with pytest.raises(ProviderError):
        list(retrying.stream(MESSAGES, OPTIONS))
    assert slept == [1.0, 2.0, 4.0] and len(retrying.failures) == 4


def test_wrapper_passes_the_models_data_and_no_operation_past_its_interface():
    """Nothing reached through `Retrying` runs without its call: the model's data (its name, its model) pass;
    a method the model has beyond the interface does not (a passthrough ran it with NO_CALL)."""
    flaky = Flaky(fail=0)
    flaky.soul_from_intent = flaky.local.soul_from_intent  # an operation of the local model's, not the interface's
    retrying = Retrying(flaky, ModelCall(org="org_caller"))
    assert retrying.name == "fake" and retrying.model == "fake-model" and retrying.embedding_model == ""
    for name in ("soul_from_intent", "local", "calls", "no_such_attribute"):
        with pytest.raises(AttributeError):
            getattr(retrying, name)
    public = {name for name in dir(Retrying) if not name.startswith("_")}
    operations = {"generate", "stream", "moderate", "embed", "generate_image", "edit_image"}
    data = {"model", "embedding_model", "embedding_identity", "failures", "close"}
    assert public == operations | data, public ^ (operations | data)  # a new member is one of these, or says why
