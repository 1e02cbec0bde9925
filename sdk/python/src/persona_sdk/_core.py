"""The HTTP core every resource calls: auth, idempotency keys, the retry
policy, error mapping, pagination and stream opening."""

from __future__ import annotations

import email.utils
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

import httpx

from ._errors import APIConnectionError, APITimeoutError, PersonaError, error_from_response
from ._version import VERSION

if TYPE_CHECKING:
    from ._streaming import EventStream

    S = TypeVar("S", bound=EventStream[Any])

_C = TypeVar("_C", bound="ClientCore")

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

# Transport failures before the request left: always safe to send again.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures after it may have reached the server: retried only when idempotent.
_MAYBE_SENT = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadTimeout, httpx.WriteTimeout)


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


class ClientCore:
    """Configuration and the request machinery (see PersonaClient for the options)."""

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
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(timeout=self.timeout)
        #: The last HTTP response received (a success or an error), e.g. for
        #: `X-RateLimit-Remaining` or `Idempotent-Replayed`. Per client, not per thread.
        self.last_response: httpx.Response | None = None
        self._init_resources()

    def _init_resources(self) -> None:
        """Attaches the resources (the generated client overrides this)."""

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- requests ----------------------------------------------------------------------

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
        method = method.upper()
        headers = self._headers(extra_headers)
        if content_type:
            headers["Content-Type"] = content_type
        if method in WRITE_METHODS:
            key = self._idempotency_key(idempotency_key)
            if key:
                headers["Idempotency-Key"] = key
        request = self._http.build_request(
            method, self.base_url + path, params=compact(params or {}), json=json, content=content, headers=headers,
            timeout=self.timeout,
        )
        return self._send(request, stream=False)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        return response.json() if response.content else {}

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"User-Agent": f"persona-sdk-python/{VERSION}", "Accept": "application/json", **self.default_headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(extra or {})
        return headers

    def _idempotency_key(self, given: str | Literal[False] | None) -> str | None:
        if given is False:
            return None
        if given:
            return given
        # One key per call, made here once: every retry of the call sends it again.
        return str(uuid.uuid4()) if self.idempotency_keys else None

    def retry_delay(self, error: PersonaError, retries: int) -> float | None:
        """Seconds to wait before retrying after `error` (`retries` done so far), or None to raise it."""
        if retries >= self.max_retries:
            return None
        if error.code in BACKOFF_CODES:
            return self.backoff_base * 2**retries
        if error.code in RETRY_AFTER_CODES:
            wait = retry_after_seconds(error.headers.get("retry-after"))
            if wait is None:
                hinted = error.details.get("retryAfter")
                wait = float(hinted) if isinstance(hinted, (int, float)) else self.backoff_base * 2**retries
            # A wait longer than the cap (a day window's reset) is the caller's call.
            return wait if wait <= self.max_retry_wait else None
        return None

    def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        retries = 0
        idempotent = request.method in IDEMPOTENT_METHODS or "idempotency-key" in request.headers
        while True:
            try:
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                retryable = isinstance(exc, _NOT_SENT) or (idempotent and isinstance(exc, _MAYBE_SENT))
                if retryable and retries < self.max_retries:
                    time.sleep(self.backoff_base * 2**retries)
                    retries += 1
                    continue
                cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
                raise cls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
            self.last_response = response
            if response.status_code < 400:
                return response
            if stream:
                response.read()
                response.close()
            error = error_from_response(response)
            delay = self.retry_delay(error, retries)
            if delay is None:
                raise error
            time.sleep(delay)
            retries += 1

    # --- streams -----------------------------------------------------------------------

    def _stream(
        self,
        cls: type[S],
        method: str,
        path: str,
        *,
        body: Any,
        last_event_id: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> S:
        return cls(self, method, path, body=body, last_event_id=last_event_id, extra_headers=extra_headers)

    def _open_stream(
        self, method: str, path: str, body: Any, extra_headers: Mapping[str, str] | None, last_event_id: str | None,
    ) -> httpx.Response:
        """Opens (or resumes, with Last-Event-ID) a server-sent event stream. No
        Idempotency-Key: a stream is not replayed by one; resuming is by event id."""
        headers = self._headers(extra_headers)
        headers["Accept"] = "text/event-stream"
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        request = self._http.build_request(method, self.base_url + path, json=body, headers=headers,
                                           timeout=self.timeout)
        return self._send(request, stream=True)

    # --- pagination --------------------------------------------------------------------

    def paginate(self, method: Callable[..., Mapping[str, Any]], *args: Any, **params: Any) -> Iterator[Any]:
        """Every item of a list method, page after page: every list takes
        `cursor` and `limit` and answers `items` and `nextCursor` (empty on
        the last page). `for key in client.paginate(client.api_keys.list, limit=50): ...`;
        each list's `<method>_iter` is this, typed."""
        cursor = params.pop("cursor", None)
        while True:
            page = method(*args, **params, cursor=cursor)
            yield from page.get("items") or []
            cursor = page.get("nextCursor") or None
            if cursor is None:
                return


class Resource:
    """A group of operations (one OpenAPI tag)."""

    def __init__(self, client: ClientCore) -> None:
        self._client = client
