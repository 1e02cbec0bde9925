"""A lean asyncio HTTP/1.1 keep-alive client for webhook POSTs.

The worker sends one small POST per delivery and reads at most a status, a
`Retry-After` and the first `RESPONSE_BODY_LIMIT` bytes of the body; a
general-purpose client (httpx) spent most of the worker's CPU in per-request
bookkeeping. This one writes each request in one `write`, parses the
response in place (status line, headers, Content-Length, chunked or
read-until-close bodies) and keeps idle connections per origin, at most
`max_connections` open in all. A connection is reused only after a complete,
keep-alive response; anything else (timeout, cancellation, a large or
close-delimited body, a protocol error) closes it.

The caller holds a `slot()` per request (at most `max_connections` at once)
and bounds the request with its own timeout (`asyncio.wait_for`) inside it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

MAX_HEADER_BYTES = 64 * 1024
# A response body up to this size is read to the end so the connection can be
# reused; a longer one is read up to what the caller keeps, then the
# connection is closed.
DRAIN_LIMIT = 64 * 1024


class HTTPError(Exception):
    """A connection or protocol failure (no usable response)."""


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes  # at most the caller's `body_limit` bytes


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time."""

    def __init__(self, origin: tuple[str, str, int]):
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.pos = 0
        self.closed = False
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.idle_since = 0.0
        self.reused = False  # has completed an exchange before

    # protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.eof = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # reading

    async def _more(self) -> None:
        if self.eof:
            raise HTTPError(f"connection closed by peer{f': {self.error}' if self.error else ''}")
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    async def _until(self, marker: bytes, limit: int) -> int:
        """Index of `marker` at or after `pos`, reading as needed."""
        while True:
            i = self.buf.find(marker, self.pos)
            if i >= 0:
                return i
            if len(self.buf) - self.pos > limit:
                raise HTTPError("response head too large")
            await self._more()

    async def _exactly(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            await self._more()
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # one exchange

    async def request(self, head: bytes, body: bytes, body_limit: int) -> tuple[Response, bool]:
        """Send one request; the response and whether the connection may be reused."""
        if self.pos:
            del self.buf[:self.pos]
            self.pos = 0
        if self.transport is None:
            raise ConnectionError("the connection is closed")
        self.transport.write(head + body)
        while True:
            end = await self._until(b"\r\n\r\n", MAX_HEADER_BYTES)
            lines = bytes(self.buf[self.pos:end]).decode("latin-1").split("\r\n")
            self.pos = end + 4
            status_line = lines[0].split(" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
                raise HTTPError(f"malformed status line: {lines[0][:100]!r}")
            status = int(status_line[1])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise HTTPError("malformed header line")
                headers[name.strip().lower()] = value.strip()
            if 100 <= status < 200 and status != 101:
                continue  # interim response (100 Continue, 103 Early Hints)
            break
        keep = status_line[0] == "HTTP/1.1"
        conn_header = headers.get("connection", "").lower()
        if "close" in conn_header:
            keep = False
        elif "keep-alive" in conn_header:
            keep = True
        if status in (204, 304) or status == 101:
            return Response(status, headers, b""), keep and status != 101
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body_out, complete = await self._chunked(body_limit)
            return Response(status, headers, body_out), keep and complete
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HTTPError("malformed Content-Length")
            n = int(length)
            if n <= DRAIN_LIMIT:
                data = await self._exactly(n)
                return Response(status, headers, data[:body_limit]), keep
            return Response(status, headers, await self._exactly(body_limit)), False
        # Delimited by the connection closing: keep what the caller wants, then close.
        while len(self.buf) - self.pos < body_limit and not self.eof:
            await self._more()
        return Response(status, headers, bytes(self.buf[self.pos:self.pos + body_limit])), False

    async def _chunked(self, body_limit: int) -> tuple[bytes, bool]:
        kept = bytearray()
        total = 0
        while True:
            end = await self._until(b"\r\n", 1024)
            size_text = bytes(self.buf[self.pos:end]).split(b";", 1)[0].strip()
            self.pos = end + 2
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HTTPError("malformed chunk size") from None
            if size == 0:
                while True:  # trailers, then the empty line
                    end = await self._until(b"\r\n", MAX_HEADER_BYTES)
                    empty = end == self.pos
                    self.pos = end + 2
                    if empty:
                        return bytes(kept), True
            total += size
            if total > DRAIN_LIMIT:
                if len(kept) < body_limit:
                    kept += await self._exactly(min(size, body_limit - len(kept)))
                return bytes(kept[:body_limit]), False
            chunk = await self._exactly(size + 2)
            if len(kept) < body_limit:
                kept += chunk[:min(size, body_limit - len(kept))]


class HTTPClient:
    """Keep-alive connections per origin, at most `max_connections` open."""

    def __init__(self, max_connections: int = 64, keepalive_expiry: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None, user_agent: str = "",
                 addresses: Callable[[str, int], list[str]] | None = None):
        # `addresses(host, port)`: the vetted addresses to connect to (raising
        # HTTPError when none may be used). Connections go to those exact
        # addresses, so a DNS answer that changes between the check and the
        # connect (rebinding) cannot redirect a request.
        self.addresses = addresses
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self.ssl_context = ssl_context
        self.user_agent = user_agent
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._open = 0
        self._slots: asyncio.Semaphore | None = None
        self._targets: dict[str, tuple[tuple[str, str, int], bytes]] = {}

    def _target(self, url: str) -> tuple[tuple[str, str, int], bytes]:
        """(origin, the request line and Host header) for `url`, cached."""
        cached = self._targets.get(url)
        if cached is not None:
            return cached
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise HTTPError(f"unsupported URL: {url[:100]}")
        port = parts.port or (443 if scheme == "https" else 80)
        host = parts.hostname
        if not host.isascii():
            host = host.encode("idna").decode("ascii")
        if any(c <= " " or c in "/?#@" for c in host):
            raise HTTPError("invalid characters in host")
        host_header = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            host_header += f":{parts.port}"
        # Spaces, controls and non-ASCII percent-encoded; existing escapes kept.
        path = urllib.parse.quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                                  safe="!#$%&'()*+,/:;=?@[]~")
        prefix = f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n"
        if self.user_agent:
            prefix += f"User-Agent: {self.user_agent}\r\n"
        value = ((scheme, host, port), prefix.encode("ascii"))
        if len(self._targets) > 10_000:
            self._targets.clear()
        self._targets[url] = value
        return value

    def slot(self) -> asyncio.Semaphore:
        """Hold one while calling `post` (`async with client.slot(): ...`):
        at most `max_connections` requests run at once, and a caller's
        timeout can start once its request has a connection to go on."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        return self._slots

    async def post(self, url: str, body: bytes, headers: dict[str, str], body_limit: int) -> Response:
        """POST `body`, holding a `slot()`; the response with at most
        `body_limit` body bytes. Raises HTTPError (or OSError) when no
        response was received."""
        try:
            origin, prefix = self._target(url)
            head = prefix + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1") + \
                b"Content-Length: %d\r\n\r\n" % len(body)
        except UnicodeEncodeError:
            raise HTTPError("header value not encodable as latin-1") from None
        conn = self._idle_connection(origin)
        if conn is None:
            conn = await self._connect(origin)
        try:
            return await self._exchange(conn, head, body, body_limit)
        except (HTTPError, OSError):
            if not conn.reused or len(conn.buf) > 0:
                raise
        # A kept-alive connection the server closed as we reused it (nothing
        # came back): once more, on a fresh connection.
        return await self._exchange(await self._connect(origin), head, body, body_limit)

    async def _exchange(self, conn: _Connection, head: bytes, body: bytes, body_limit: int) -> Response:
        """One request on `conn`; afterwards the connection is idle again
        (complete keep-alive response) or closed (anything else)."""
        keep = False
        try:
            response, keep = await conn.request(head, body, body_limit)
            return response
        finally:
            if keep and not conn.closed:
                conn.idle_since = time.monotonic()
                conn.reused = True
                self._idle.setdefault(conn.origin, []).append(conn)
            else:
                conn.close()
                self._open -= 1

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        pool = self._idle.get(origin)
        now = time.monotonic()
        while pool:
            conn = pool.pop()
            if not conn.closed and not conn.eof and now - conn.idle_since < self.keepalive_expiry:
                return conn
            conn.close()
            self._open -= 1
        return None

    async def _connect(self, origin: tuple[str, str, int]) -> _Connection:
        # Over the limit (idle connections to other origins): close the oldest idle one.
        if self._open >= self.max_connections:
            oldest = min((c for pool in self._idle.values() for c in pool), key=lambda c: c.idle_since, default=None)
            if oldest is not None:
                self._idle[oldest.origin].remove(oldest)
                oldest.close()
                self._open -= 1
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = None
        if scheme == "https":
            tls = self.ssl_context or ssl.create_default_context()
        self._open += 1
        try:
            targets = [host] if self.addresses is None else await asyncio.to_thread(self.addresses, host, port)
            error: BaseException | None = None
            for target in targets:
                try:
                    _, conn = await loop.create_connection(
                        lambda: _Connection(origin), target, port, ssl=tls, server_hostname=host if tls else None,
                    )
                    return conn
                except OSError as exc:
                    error = exc
            raise error or HTTPError(f"no address to connect to for {host}")
        except BaseException:
            self._open -= 1
            raise

    async def aclose(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
                self._open -= 1
        self._idle.clear()

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def resolve_host(host: str, port: int) -> list[str]:
    """`host`'s addresses (DNS: the network, so here in the client, not in the service that vets them)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})
