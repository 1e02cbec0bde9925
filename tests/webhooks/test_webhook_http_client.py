"""The worker's lean HTTP/1.1 client against raw servers: framing (Content-
Length, chunked, close-delimited, interim 100), keep-alive reuse, a stale
kept-alive connection, large bodies, timeouts, TLS."""

from __future__ import annotations

import asyncio
import ssl
import subprocess

import pytest
from persona_service.webhooks.http import HTTPClient, HTTPError


async def serve(responses: list[bytes], *, close_after: bool = False, ssl_ctx=None):
    """A server answering each request on a connection with the next entry of
    `responses` (cycled); records (connection number, request head)."""
    seen: list[tuple[int, bytes]] = []
    conns = [0]

    async def handle(reader, writer):
        conns[0] += 1
        me = conns[0]
        i = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                seen.append((me, head))
                writer.write(responses[i % len(responses)])
                i += 1
                await writer.drain()
                if close_after:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_ctx)
    return server, server.sockets[0].getsockname()[1], seen


def run(coro):
    return asyncio.run(coro)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def test_keep_alive_reuses_one_connection_and_sends_headers():
    async def main():
        server, port, seen = await serve([OK])
        async with HTTPClient(4, user_agent="UA/1") as client:
            for _ in range(3):
                async with client.slot():
                    r = await client.post(f"http://127.0.0.1:{port}/h?x=1", b"{}", {"X-A": "b"}, 1024)
                assert (r.status_code, r.body) == (200, b"ok")
        server.close()
        assert {c for c, _ in seen} == {1}
        head = seen[0][1]
        assert head.startswith(b"POST /h?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
        assert b"User-Agent: UA/1\r\n" in head and b"X-A: b\r\n" in head and b"Content-Length: 2\r\n" in head
    run(main())


def test_framings_and_body_limit():
    chunked = (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\nRetry-After: 120\r\n\r\n"
               b"3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\nTrailer: x\r\n\r\n")
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"y" * 100000

    async def main():
        server, port, seen = await serve([chunked, interim, big, OK])
        url = f"http://127.0.0.1:{port}/"
        async with HTTPClient(1) as client:
            async with client.slot():
                r = await client.post(url, b"1", {}, 5)
            assert (r.status_code, r.body, r.headers["retry-after"]) == (500, b"abcde", "120")
            async with client.slot():
                r = await client.post(url, b"1", {}, 1024)
            assert (r.status_code, r.body) == (200, b"ok")
            async with client.slot():
                r = await client.post(url, b"1", {}, 1024)
            assert r.body == b"y" * 1024  # too large to drain: kept 1 KiB, connection closed
        server.close()
        assert [c for c, _ in seen] == [1, 1, 1]
    run(main())


def test_close_delimited_and_connection_close_and_stale_connection():
    until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye"

    async def main():
        server, port, seen = await serve([until_close], close_after=True)
        async with HTTPClient(2) as client:
            for _ in range(2):
                async with client.slot():
                    r = await client.post(f"http://127.0.0.1:{port}/", b"1", {}, 1024)
                assert r.body == b"bye"
        server.close()
        assert [c for c, _ in seen] == [1, 2]

        # The server closes a kept-alive connection after each answer (without
        # saying so): the next request on it is retried on a fresh connection.
        server, port, seen = await serve([OK], close_after=True)
        async with HTTPClient(2) as client:
            for _ in range(3):
                async with client.slot():
                    r = await client.post(f"http://127.0.0.1:{port}/", b"1", {}, 1024)
                assert r.status_code == 200
                await asyncio.sleep(0.05)
        server.close()
        assert len(seen) == 3
    run(main())


def test_timeout_closes_the_connection_and_errors_raise():
    async def main():
        server, port, seen = await serve([b"HTTP/1.1 200 OK\r\n"])  # never finishes the head
        async with HTTPClient(2) as client:
            with pytest.raises(TimeoutError):
                async with client.slot():
                    await asyncio.wait_for(client.post(f"http://127.0.0.1:{port}/", b"1", {}, 1024), 0.2)
            assert client._open == 0
        server.close()
        bad, port2, _ = await serve([b"SMTP ready\r\n\r\n"])
        async with HTTPClient(2) as client:
            with pytest.raises(HTTPError):
                async with client.slot():
                    await client.post(f"http://127.0.0.1:{port2}/", b"1", {}, 1024)
            with pytest.raises(OSError):
                async with client.slot():
                    await client.post("http://127.0.0.1:9/", b"1", {}, 1024)
        bad.close()
    run(main())


def test_tls(tmp_path):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def main():
        server, port, seen = await serve([OK], ssl_ctx=server_ctx)
        trusting = ssl.create_default_context(cafile=str(cert))
        async with HTTPClient(2, ssl_context=trusting) as client:
            for _ in range(2):
                async with client.slot():
                    r = await client.post(f"https://localhost:{port}/tls", b"1", {}, 1024)
                assert r.status_code == 200
        async with HTTPClient(2, ssl_context=ssl.create_default_context()) as client:
            with pytest.raises(ssl.SSLError):  # an unknown issuer is refused
                async with client.slot():
                    await client.post(f"https://localhost:{port}/tls", b"1", {}, 1024)
        server.close()
        assert [c for c, _ in seen] == [1, 1]
    run(main())


def test_connects_to_the_vetted_addresses_only():
    """The client dials what `addresses(host, port)` returns (keeping the
    URL's host for the Host header), and nothing when it refuses: a name
    re-resolved to a private address after a check cannot be reached."""
    asked = []

    def vetted(host, port):
        asked.append(host)
        if host == "refused.example":
            raise HTTPError("destination refused: private_address")
        return ["127.0.0.1"]

    async def main():
        server, port, seen = await serve([OK])
        async with HTTPClient(2, addresses=vetted) as client:
            async with client.slot():
                r = await client.post(f"http://named.example:{port}/a", b"{}", {}, 1024)
            assert r.status_code == 200
            with pytest.raises(HTTPError, match="private_address"):
                async with client.slot():
                    await client.post(f"http://refused.example:{port}/b", b"{}", {}, 1024)
        server.close()
        assert asked == ["named.example", "refused.example"]
        assert len(seen) == 1 and seen[0][1].startswith(f"POST /a HTTP/1.1\r\nHost: named.example:{port}".encode())
    run(main())
