"""Retries with the spec's backoff: up to 3 retries after 1 s, 2 s and 4 s.

`Retrying(model, call)` is the `Provider` of one call: the model's operations for that `ModelCall`. `generate`, `moderate`,
`embed`, `generate_image` and `edit_image` are retried on `ProviderError` (which includes `ProviderTimeout`);
after the last retry the last error is re-raised. `stream` is retried only
when it fails before its first delta was yielded: once text has reached the
caller a retry would duplicate it, so later failures propagate at once.

Every failed attempt is reported, so callers can audit-log the upstream
envelopes (`error.upstream`, `error.upstream_status`):

* ``on_failure(error, attempt, operation)`` is called for each one;
* ``failures`` lists the failed attempts of the calling thread's most recent
  call (it is reset when a call starts; per thread, so concurrent requests
  sharing one `Retrying` do not see each other's failures);
* the error finally raised carries them as ``error.failures`` too.

What is retried is the failure's reason's call (`kernel.model_failures`):
configuration errors the upstream will answer the same way again (401/403,
a model it does not have, another 4xx than 408, 409 and 429) are not retried
unless ``retry_client_errors=True``. A wait the upstream asked for
(`Retry-After` on a 429 or 503) is honoured: the retry comes no sooner than
that, nor sooner than the backoff. All retries of one call stay within
``budget_seconds`` (PERSONA_PROVIDER_RETRY_BUDGET_SECONDS): a retry whose wait
would end past it is not made, and the last failure is raised (a 429 or 503
as `503 service_unavailable` with the upstream's `Retry-After`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, cast

from persona_service.kernel import metrics, tracing
from persona_service.kernel.json_values import JSONObject
from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    ImageProvider,
    Message,
    Model,
    ModelCall,
    ModerationResult,
    ProviderError,
    embedding_identity,
)
from persona_service.providers.settings import ProviderSettings

T = TypeVar("T")
DEFAULT_DELAYS = (1.0, 2.0, 4.0)


def failure_details(error: ProviderError, attempt: int, operation: str) -> JSONObject:
    """What the audit log keeps of one failed upstream attempt (callers never see it)."""
    return {"operation": operation, "attempt": attempt, "upstreamStatus": error.upstream_status,
            "upstream": error.upstream, "reason": error.reason}


class Retrying:
    """The `Provider` of one call: `provider`'s operations for `call` (its `ModelCall`), retried."""

    def __init__(
        self,
        provider: Model | ImageProvider,
        call: ModelCall = NO_CALL,
        delays: Sequence[float] = DEFAULT_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
        on_failure: Callable[[ProviderError, int, str], None] | None = None,
        retry_client_errors: bool = False,
        budget_seconds: float | None = None,
    ):
        self.provider = provider
        self.call = call
        self.name = provider.name
        self.delays = tuple(float(d) for d in delays)
        self.sleep = sleep
        self.on_failure = on_failure
        self.retry_client_errors = retry_client_errors
        if budget_seconds is None:
            from persona_service.kernel.settings import load

            budget_seconds = load(ProviderSettings).provider_retry_budget_seconds
        self.budget_seconds = float(budget_seconds)
        self._local = threading.local()

    @property
    def failures(self) -> list[ProviderError]:
        """The failed attempts of this thread's most recent call, in order."""
        if not hasattr(self._local, "failures"):
            self._local.failures = []
        failures: list[ProviderError] = self._local.failures
        return failures

    # What callers read of the model beside its operations: data, never an operation, so that nothing reached
    # through this wrapper runs without its call (a passthrough of every attribute did: any method of the model
    # beyond the interface ran with NO_CALL).
    @property
    def model(self) -> str:
        """The chat model's name ('' where the provider names none), recorded with a reply."""
        return str(getattr(self.provider, "model", "") or "")

    @property
    def embedding_model(self) -> str:
        return str(getattr(self.provider, "embedding_model", "") or "")

    @property
    def embedding_identity(self) -> str | None:
        return embedding_identity(self._text)

    def close(self) -> None:
        """Closes the model's connections, where it holds any (the process's shutdown; a test's end)."""
        close = getattr(self.provider, "close", None)
        if close is not None:
            close()

    @property
    def _text(self) -> Model:
        return cast(Model, self.provider)

    @property
    def _images(self) -> ImageProvider:
        return cast(ImageProvider, self.provider)

    # -- interface ---------------------------------------------------------

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion:
        return self._call("generate", lambda: self._text.generate(messages, options, call=self.call))

    def moderate(self, text: str) -> ModerationResult:
        return self._call("moderate", lambda: self._text.moderate(text, call=self.call))

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._call("embed", lambda: self._text.embed(texts, call=self.call))

    def generate_image(self, prompt: ImagePrompt) -> bytes:
        return self._call("generate_image", lambda: self._images.generate_image(prompt, call=self.call))

    def edit_image(self, image: bytes, instruction: str) -> bytes:
        return self._call("edit_image", lambda: self._images.edit_image(image, instruction, call=self.call))

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        self._local.failures = []
        self._local.began = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                deltas = iter(self._text.stream(messages, options, call=self.call))
                first = next(deltas)
            except StopIteration:
                return
            except ProviderError as error:
                self._observe("stream", error.code, started)
                self._failed(error, attempt, "stream")
                continue
            self._observe("stream", "ok", started)  # to the first delta
            break
        yield first
        try:
            yield from deltas
        except ProviderError as error:
            self._record(error, attempt, "stream")
            error.failures = list(self.failures)  # type: ignore[attr-defined]
            raise

    # -- machinery ---------------------------------------------------------

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        self._local.failures = []
        self._local.began = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            attributes: dict[str, tracing.SpanValue] = {"provider.name": self.name, "provider.attempt": attempt}
            try:
                with tracing.span(f"provider.{operation}", **attributes):
                    result = call()
            except ProviderError as error:
                self._observe(operation, error.code, started)
                self._failed(error, attempt, operation)
                continue
            self._observe(operation, "ok", started)
            return result

    def _observe(self, operation: str, outcome: str, started: float) -> None:
        metrics.PROVIDER_CALLS.labels(self.name, operation, outcome).inc()
        metrics.PROVIDER_SECONDS.labels(self.name, operation).observe(time.perf_counter() - started)

    def _failed(self, error: ProviderError, attempt: int, operation: str) -> None:
        """Record a failed attempt, then sleep before the next one or re-raise."""
        self._record(error, attempt, operation)
        wait = self._wait(error, attempt)
        if wait is None:
            error.failures = list(self.failures)  # type: ignore[attr-defined]
            raise error
        self.sleep(wait)

    def _wait(self, error: ProviderError, attempt: int) -> float | None:
        """Seconds before the next attempt, or None when there is none (not retryable, retries or budget spent)."""
        if attempt > len(self.delays) or not self._retryable(error):
            return None
        wait = max(self.delays[attempt - 1], error.retry_after or 0.0)
        spent = time.monotonic() - getattr(self._local, "began", time.monotonic())
        if spent + wait > self.budget_seconds:
            return None  # (after a 429 or 503 the caller hears the upstream's Retry-After instead)
        return wait

    def _record(self, error: ProviderError, attempt: int, operation: str) -> None:
        self.failures.append(error)
        if self.on_failure is not None:
            self.on_failure(error, attempt, operation)

    def _retryable(self, error: ProviderError) -> bool:
        if self.retry_client_errors:
            return True
        return error.retryable
