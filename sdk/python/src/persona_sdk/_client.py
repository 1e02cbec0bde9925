"""PersonaClient and AsyncPersonaClient: the generated resources on the hand-written core."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ._core import AsyncCore, SyncCore
from .resources import AsyncResources, Resources


class PersonaClient(SyncCore, Resources):
    """A client of the Persona Service API.

    - `api_key`: an API key (`sk_live_…`/`sk_test_…`) or session JWT; default `$PERSONA_API_KEY`.
      `base_url`: the edge, default `$PERSONA_BASE_URL` or `http://127.0.0.1:8080`.
    - Retries (the spec's retry semantics): `provider_error` / `provider_timeout` are retried after
      `backoff_base` × 1, 2, 4 s; `rate_limited` and `service_unavailable` after their `Retry-After`
      (seconds; not when it is longer than `max_retry_wait`); connection failures when the request is safe
      to send again. At most `max_retries` retries per call (0 turns retrying off). Every other code is
      raised at once, as its typed PersonaError subclass, and so is any answer with `x-should-retry: false`
      (or `details.retryable: false`: a model failure such as a wrong key or a missing model, which the same
      call would meet again); a `Retry-After` on a `provider_error` is waited for (at least the backoff).
    - Every write carries an `Idempotency-Key` (a uuid4, the same on each retry of the call); pass
      `idempotency_key="…"` to a method to choose it, `idempotency_key=False` to send none, or
      `idempotency_keys=False` here to send none by default.
    - Streams resume by themselves after a drop, up to `stream_resumes` attempts in a row.
    - `timeout`: seconds or an httpx.Timeout (default 60 s, 10 s to connect). `http_client`: an
      httpx.Client of your own (proxies, transports, event hooks); it is not closed by `close()`.

    Resources: one attribute per API area (`client.personas`, `client.chat`, `client.webhooks`,
    `client.api_keys`, …), one method per operation (`client.personas.create`,
    `client.chat.stream_message`: the TypeScript SDK's names in snake_case); answers are models with
    snake_case attributes (`persona.display_name`). `client.last_response` is the last HTTP response
    (headers such as `X-RateLimit-Remaining`, `Idempotent-Replayed`). Use it as a context manager, or
    call `close()`.
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        max_retries: int = 3,
        backoff_base: float = 1.0,
        max_retry_wait: float = 60.0,
        timeout: float | httpx.Timeout | None = None,
        idempotency_keys: bool = True,
        stream_resumes: int = 3,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(api_key, base_url=base_url, max_retries=max_retries, backoff_base=backoff_base,
                         max_retry_wait=max_retry_wait, timeout=timeout, idempotency_keys=idempotency_keys,
                         stream_resumes=stream_resumes, default_headers=default_headers, http_client=http_client)
        self._attach(self)


class AsyncPersonaClient(AsyncCore, AsyncResources):
    """PersonaClient for asyncio, with the same options, resources and methods, awaited:
    `await client.personas.create(...)`, `async with await client.chat.stream_message(...) as stream`,
    `async for persona in client.personas.list_iter()`. `http_client` is an httpx.AsyncClient;
    use it as an async context manager, or `await client.close()`."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        max_retries: int = 3,
        backoff_base: float = 1.0,
        max_retry_wait: float = 60.0,
        timeout: float | httpx.Timeout | None = None,
        idempotency_keys: bool = True,
        stream_resumes: int = 3,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(api_key, base_url=base_url, max_retries=max_retries, backoff_base=backoff_base,
                         max_retry_wait=max_retry_wait, timeout=timeout, idempotency_keys=idempotency_keys,
                         stream_resumes=stream_resumes, default_headers=default_headers, http_client=http_client)
        self._attach(self)
