"""PersonaClient: the generated resources on the hand-written core."""

from __future__ import annotations

from ._generated import GeneratedClient


class PersonaClient(GeneratedClient):
    """A client of the Persona Service API.

    `PersonaClient(api_key=None, *, base_url=None, max_retries=3, backoff_base=1.0, max_retry_wait=60.0,
    timeout=None, idempotency_keys=True, stream_resumes=3, default_headers=None, http_client=None)`

    - `api_key`: an API key (`sk_live_…`/`sk_test_…`), session JWT or SCIM token; default
      `$PERSONA_API_KEY`. `base_url`: the edge, default `$PERSONA_BASE_URL` or `http://127.0.0.1:8080`.
    - Retries (the spec's retry semantics): `provider_error` / `provider_timeout` are retried after
      `backoff_base` × 1, 2, 4 s; `rate_limited` and `service_unavailable` after their `Retry-After`
      (seconds; not when it is longer than `max_retry_wait`); connection failures when the request is safe
      to send again. At most `max_retries` retries per call (0 turns retrying off). Every other code is
      raised at once, as its typed PersonaError subclass.
    - Every write carries an `Idempotency-Key` (a uuid4, the same on each retry of the call); pass
      `idempotency_key="…"` to a method to choose it, `idempotency_key=False` to send none, or
      `idempotency_keys=False` here to send none by default.
    - Streams resume by themselves after a drop, up to `stream_resumes` attempts in a row.
    - `timeout`: seconds or an httpx.Timeout (default 60 s, 10 s to connect). `http_client`: an
      httpx.Client of your own (proxies, transports, event hooks); it is not closed by `close()`.

    Resources: one attribute per API area (`client.personas`, `client.chat`, `client.webhooks`,
    `client.api_keys`, …), one method per operation (`client.personas.create`,
    `client.chat.stream_message`: the TypeScript SDK's names in snake_case). `client.last_response`
    is the last HTTP response (headers such as `X-RateLimit-Remaining`, `Idempotent-Replayed`). Use
    it as a context manager, or call `close()`.
    """
