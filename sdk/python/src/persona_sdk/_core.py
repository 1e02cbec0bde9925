"""The HTTP core every resource calls, sync and async: auth, idempotency keys,
the retry policy, error mapping, answer parsing, pagination and stream
opening. What does not wait on the network (building requests, choosing a
retry's delay) is written once in BaseCore; SyncCore and AsyncCore only send."""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from urllib.parse import quote

import httpx

from ._errors import APIConnectionError, APITimeoutError, PersonaError, error_from_response
from ._models import BaseModel, parse
from ._version import VERSION

if TYPE_CHECKING:
    from ._streaming import AsyncEventStream, EventStream

    S = TypeVar("S", bound=EventStream[Any])
    AS = TypeVar("AS", bound=AsyncEventStream[Any])

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
_C = TypeVar("_C", bound="SyncCore")
_AC = TypeVar("_AC", bound="AsyncCore")

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Methods that may be sent twice without a key: HTTP says so.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})

# The spec's retry semantics, by catalogue code. Anything not listed here is
# raised at once: validation_failed, idempotency_conflict, drift_blocked,
# audit_blocked, moderation_blocked and forbidden never retry, and neither
# does quota_exceeded (its Retry-After is the monthly reset, an HTTP-date).
BACKOFF_CODES = frozenset({"provider_error", "provider_timeout"})
# The wait is the answer's Retry-After (seconds). service_unavailable is the
# spec's other 5xx "retry candidate" (a dependency outage, Retry-After: 2).
RETRY_AFTER_CODES = frozenset({"rate_limited", "service_unavailable"})
# Whatever the code, the service's own signal wins: `x-should-retry: false` (or `details.retryable: false`, a
# model failure that will be answered the same way again: a wrong key, a model the server does not have) is
# never retried, and a `Retry-After` on a retried answer is waited for (never less than the backoff).

# Transport failures before the request left: always safe to send again.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures after it may have reached the server: retried only when idempotent.
_MAYBE_SENT = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadTimeout, httpx.WriteTimeout)


def should_retry(error: PersonaError) -> bool:
    """Whether the service allows a retry: not when it says `x-should-retry: false` or `details.retryable: false`."""
    if error.headers.get("x-should-retry", "").strip().lower() == "false":
        return False
    return error.details.get("retryable") is not False


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds named by a Retry-After header: a number of seconds or an HTTP-date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def compact(values: Mapping[str, Any]) -> dict[str, Any]:
    """The members that were given (None means: leave it out)."""
    return {k: v for k, v in values.items() if v is not None}


def path_param(value: object) -> str:
    """A path parameter, percent-encoded as one segment."""
    return quote(str(value), safe="")


class Page(Protocol[T_co]):
    """What every list answers: `items` and `next_cursor` (empty on the last page)."""

    @property
    def items(self) -> Sequence[T_co]: ...

    @property
    def next_cursor(self) -> str | None: ...


class BaseCore:
    """Configuration and what sync and async share (see PersonaClient for the options)."""

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
    ) -> None:
        if max_retries < 0 or stream_resumes < 0:
            raise ValueError("max_retries and stream_resumes must be >= 0")
        self.api_key = api_key if api_key is not None else os.environ.get("PERSONA_API_KEY")
        self.base_url = (base_url or os.environ.get("PERSONA_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_retry_wait = max_retry_wait
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        self.idempotency_keys = idempotency_keys
        self.stream_resumes = stream_resumes
        self.default_headers = dict(default_headers or {})
        #: The last HTTP response received (a success or an error), e.g. for
        #: `X-RateLimit-Remaining` or `Idempotent-Replayed`. Per client, not per thread or task.
        self.last_response: httpx.Response | None = None

    def _build(
        self,
        http: httpx.Client | httpx.AsyncClient,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        idempotency_key: str | Literal[False] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        last_event_id: str | None = None,
        stream: bool = False,
    ) -> httpx.Request:
        method = method.upper()
        headers = {"User-Agent": f"persona-sdk-python/{VERSION}", "Accept": "application/json", **self.default_headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(extra_headers or {})
        if content_type:
            headers["Content-Type"] = content_type
        if stream:
            headers["Accept"] = "text/event-stream"
            if last_event_id:
                headers["Last-Event-ID"] = last_event_id
        if method in WRITE_METHODS and not last_event_id:
            # A stream's key too: its request sent again (a 503, a connection lost before the answer) follows
            # the run the first one started, if it did, instead of starting a second. A resume needs none.
            key = self._idempotency_key(idempotency_key)
            if key:
                headers["Idempotency-Key"] = key
        return http.build_request(method, self.base_url + path, params=compact(params or {}), json=json,
                                  content=content, headers=headers, timeout=self.timeout)

    def _idempotency_key(self, given: str | Literal[False] | None) -> str | None:
        if given is False:
            return None
        if given:
            return given
        # One key per call, made here once: every retry of the call sends it again.
        return str(uuid.uuid4()) if self.idempotency_keys else None

    def retry_delay(self, error: PersonaError, retries: int) -> float | None:
        """Seconds to wait before retrying after `error` (`retries` done so far), or None to raise it."""
        if retries >= self.max_retries or not should_retry(error):
            return None
        if error.code in BACKOFF_CODES:
            backoff = self.backoff_base * float(2**retries)
            asked = retry_after_seconds(error.headers.get("retry-after"))
            if asked is None:
                return backoff
            return max(backoff, asked) if asked <= self.max_retry_wait else None
        if error.code in RETRY_AFTER_CODES:
            wait = retry_after_seconds(error.headers.get("retry-after"))
            if wait is None:
                hinted = error.details.get("retryAfter")
                wait = float(hinted) if isinstance(hinted, (int, float)) else self.backoff_base * float(2**retries)
            # A wait longer than the cap (a day window's reset) is the caller's call.
            return wait if wait <= self.max_retry_wait else None
        return None

    def _transport_delay(self, exc: httpx.TransportError, request: httpx.Request, retries: int) -> float:
        """The wait before sending `request` again after a transport failure; raises when it may not be."""
        idempotent = request.method in IDEMPOTENT_METHODS or "idempotency-key" in request.headers
        retryable = isinstance(exc, _NOT_SENT) or (idempotent and isinstance(exc, _MAYBE_SENT))
        if retryable and retries < self.max_retries:
            return self.backoff_base * float(2**retries)
        cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise cls(f"{request.method} {request.url} failed: {reason}") from exc  # the address: what to check

    def _error_delay(self, response: httpx.Response, retries: int) -> float:
        """The wait before a retry after an error answer (its body read); raises its typed error otherwise."""
        error = error_from_response(response)
        delay = self.retry_delay(error, retries)
        if delay is None:
            raise error
        return delay

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        return response.json() if response.content else {}


class SyncCore(BaseCore):
    """The blocking client on an httpx.Client."""

    def __init__(self, api_key: str | None = None, *, http_client: httpx.Client | None = None, **options: Any) -> None:
        super().__init__(api_key, **options)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(timeout=self.timeout)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        idempotency_key: str | Literal[False] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Sends any request with the client's auth, idempotency key and retry
        policy; returns the response, or raises the typed error of a 4xx/5xx."""
        request = self._build(self._http, method, path, params=params, json=json, content=content,
                              content_type=content_type, idempotency_key=idempotency_key, extra_headers=extra_headers)
        return self._send(request, stream=False)

    def _call(self, cls: type[M], method: str, path: str, **options: Any) -> M:
        return parse(cls, self._json(self.request(method, path, **options)))

    def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        retries = 0
        while True:
            try:
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                time.sleep(self._transport_delay(exc, request, retries))
                retries += 1
                continue
            self.last_response = response
            if response.status_code < 400:
                return response
            if stream:
                response.read()
                response.close()
            time.sleep(self._error_delay(response, retries))
            retries += 1

    def _open_stream(self, method: str, path: str, body: Any, extra_headers: Mapping[str, str] | None,
                     last_event_id: str | None) -> httpx.Response:
        """Opens (or resumes, with Last-Event-ID) a server-sent event stream."""
        request = self._build(self._http, method, path, json=body, extra_headers=extra_headers,
                              last_event_id=last_event_id, stream=True)
        return self._send(request, stream=True)

    def _stream(self, cls: type[S], method: str, path: str, *, body: Any, last_event_id: str | None = None,
                extra_headers: Mapping[str, str] | None = None) -> S:
        stream = cls(self, method, path, body=body, last_event_id=last_event_id, extra_headers=extra_headers)
        stream._open()
        return stream

    def paginate(self, method: Callable[..., Page[T]], *args: Any, **params: Any) -> Iterator[T]:
        """Every item of a list method, page after page: every list takes `cursor` and `limit`
        and answers `items` and `next_cursor` (empty on the last page).
        `for key in client.paginate(client.api_keys.list, limit=50): ...`; each list's
        `<method>_iter` is this."""
        cursor = params.pop("cursor", None)
        return self._pages(lambda c: method(*args, **params, cursor=c), cursor)

    @staticmethod
    def _pages(fetch: Callable[[str | None], Page[T]], cursor: str | None = None) -> Iterator[T]:
        while True:
            page = fetch(cursor)
            yield from page.items
            cursor = page.next_cursor or None
            if cursor is None:
                return


class AsyncCore(BaseCore):
    """The asyncio client on an httpx.AsyncClient: the same surface, awaited."""

    def __init__(self, api_key: str | None = None, *, http_client: httpx.AsyncClient | None = None,
                 **options: Any) -> None:
        super().__init__(api_key, **options)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=self.timeout)

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self: _AC) -> _AC:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        idempotency_key: str | Literal[False] | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Sends any request with the client's auth, idempotency key and retry
        policy; returns the response, or raises the typed error of a 4xx/5xx."""
        request = self._build(self._http, method, path, params=params, json=json, content=content,
                              content_type=content_type, idempotency_key=idempotency_key, extra_headers=extra_headers)
        return await self._send(request, stream=False)

    async def _call(self, cls: type[M], method: str, path: str, **options: Any) -> M:
        return parse(cls, self._json(await self.request(method, path, **options)))

    async def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        retries = 0
        while True:
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                await asyncio.sleep(self._transport_delay(exc, request, retries))
                retries += 1
                continue
            self.last_response = response
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
                await response.aclose()
            await asyncio.sleep(self._error_delay(response, retries))
            retries += 1

    async def _open_stream(self, method: str, path: str, body: Any, extra_headers: Mapping[str, str] | None,
                           last_event_id: str | None) -> httpx.Response:
        """Opens (or resumes, with Last-Event-ID) a server-sent event stream."""
        request = self._build(self._http, method, path, json=body, extra_headers=extra_headers,
                              last_event_id=last_event_id, stream=True)
        return await self._send(request, stream=True)

    async def _stream(self, cls: type[AS], method: str, path: str, *, body: Any, last_event_id: str | None = None,
                      extra_headers: Mapping[str, str] | None = None) -> AS:
        stream = cls(self, method, path, body=body, last_event_id=last_event_id, extra_headers=extra_headers)
        await stream._open()
        return stream

    def paginate(self, method: Callable[..., Awaitable[Page[T]]], *args: Any, **params: Any) -> AsyncIterator[T]:
        """Every item of a list method, page after page (`async for key in client.paginate(...)`)."""
        cursor = params.pop("cursor", None)
        return self._pages(lambda c: method(*args, **params, cursor=c), cursor)

    @staticmethod
    async def _pages(fetch: Callable[[str | None], Awaitable[Page[T]]], cursor: str | None = None) -> AsyncIterator[T]:
        while True:
            page = await fetch(cursor)
            for item in page.items:
                yield item
            cursor = page.next_cursor or None
            if cursor is None:
                return


class SyncResource:
    """A group of operations (one API area) of PersonaClient."""

    def __init__(self, client: SyncCore) -> None:
        self._client = client


class AsyncResource:
    """A group of operations (one API area) of AsyncPersonaClient."""

    def __init__(self, client: AsyncCore) -> None:
        self._client = client
