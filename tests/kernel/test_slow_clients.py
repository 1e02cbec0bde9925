"""Slow and idle clients cannot take the service down: the edge buffers
whole request bodies before a server sees the call, gives a client a bounded
time to send its request (then 408 in the envelope), and caps connections."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import client_for, make_stack_beside, running

REQUEST_TIMEOUT = 2
SLOW_SOCKETS = 64  # four times the servers' worker threads


@pytest.fixture(scope="module")
def edge(stack, tmp_path_factory):
    """An edge with a short request timeout, on the session's PostgreSQL and Redis."""
    slow = make_stack_beside(stack, tmp_path_factory.mktemp("slow"),
                             settings={"edge_request_timeout_seconds": REQUEST_TIMEOUT})
    with running(slow):
        yield slow


@pytest.fixture(scope="module")
def edge_tenant(tenants):
    return tenants(plan="team")


def _slow_upload(stack, tenant) -> socket.socket:
    """Headers and the start of a body, then nothing more (for now)."""
    sock = socket.create_connection(("127.0.0.1", stack.settings.http_port))
    body = json.dumps({"name": "slow", "scopes": ["personas:read"]}).encode()
    sock.sendall(
        f"POST /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.api_key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body[:3]
    )
    return sock


def test_slow_uploads_do_not_block_other_callers(edge, edge_tenant):
    slow = [_slow_upload(edge, edge_tenant) for _ in range(SLOW_SOCKETS)]
    try:
        with client_for(edge, timeout=5) as http:
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(
                    lambda _: http.get(f"/v1/orgs/{edge_tenant.org_id}", headers=edge_tenant.auth).status_code, range(64)))
            assert set(statuses) == {200}
            assert time.monotonic() - started < REQUEST_TIMEOUT  # served while every slow body is still pending
    finally:
        for sock in slow:
            sock.close()


def test_a_body_that_never_completes_gets_408_in_the_envelope(edge, edge_tenant):
    sock = _slow_upload(edge, edge_tenant)
    sock.settimeout(REQUEST_TIMEOUT + 10)
    data = b""
    try:
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split()[1] == b"408", data
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["error"]["code"] == "request_timeout"
