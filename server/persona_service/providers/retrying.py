"""Retries with the spec's backoff: up to 3 retries after 1 s, 2 s and 4 s.

`Retrying(provider)` has the provider interface. `generate`, `moderate`,
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

Client errors the upstream will answer the same way again (HTTP 4xx other
than 408, 409 and 429) are not retried unless ``retry_client_errors=True``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from persona_service.kernel import metrics, tracing
from persona_service.providers.base import (
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    ImageProvider,
    Message,
    ModerationResult,
    Provider,
    ProviderError,
)

T = TypeVar("T")
DEFAULT_DELAYS = (1.0, 2.0, 4.0)
_RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 429})


def failure_details(error: ProviderError, attempt: int, operation: str) -> dict[str, Any]:
    """What the audit log keeps of one failed upstream attempt (callers never see it)."""
    return {"operation": operation, "attempt": attempt, "upstreamStatus": error.upstream_status,
            "upstream": error.upstream, "reason": error.reason}


class Retrying:
    def __init__(
        self,
        provider: Provider | ImageProvider,
        delays: Sequence[float] = DEFAULT_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
        on_failure: Callable[[ProviderError, int, str], None] | None = None,
        retry_client_errors: bool = False,
    ):
        self.provider: Any = provider
        self.name = provider.name
        self.delays = tuple(float(d) for d in delays)
        self.sleep = sleep
        self.on_failure = on_failure
        self.retry_client_errors = retry_client_errors
        self._local = threading.local()

    @property
    def failures(self) -> list[ProviderError]:
        """The failed attempts of this thread's most recent call, in order."""
        if not hasattr(self._local, "failures"):
            self._local.failures = []
        return self._local.failures

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the interface (model, close, ...) is the wrapped provider's.
        if name in ("provider", "_local") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.provider, name)

    # -- interface ---------------------------------------------------------

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion:
        return self._call("generate", lambda: self.provider.generate(messages, options))

    def moderate(self, text: str) -> ModerationResult:
        return self._call("moderate", lambda: self.provider.moderate(text))

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._call("embed", lambda: self.provider.embed(texts))

    def generate_image(self, prompt: ImagePrompt) -> bytes:
        return self._call("generate_image", lambda: self.provider.generate_image(prompt))

    def edit_image(self, image: bytes, instruction: str) -> bytes:
        return self._call("edit_image", lambda: self.provider.edit_image(image, instruction))

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        self._local.failures = []
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                deltas = iter(self.provider.stream(messages, options))
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
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                with tracing.span(f"provider.{operation}", **{"provider.name": self.name, "provider.attempt": attempt}):
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
        if attempt > len(self.delays) or not self._retryable(error):
            error.failures = list(self.failures)  # type: ignore[attr-defined]
            raise error
        self.sleep(self.delays[attempt - 1])

    def _record(self, error: ProviderError, attempt: int, operation: str) -> None:
        self.failures.append(error)
        if self.on_failure is not None:
            self.on_failure(error, attempt, operation)

    def _retryable(self, error: ProviderError) -> bool:
        status = error.upstream_status
        if self.retry_client_errors or status is None or not 400 <= status < 500:
            return True
        return status in _RETRYABLE_CLIENT_STATUSES
