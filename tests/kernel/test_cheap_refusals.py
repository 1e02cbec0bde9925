"""Refusals are cheap (issue #28): a refused API key is remembered briefly
(no database read per attempt) until a key with that secret is created, in
every process (the invalidation bus); failed authentications reach the audit
log a row per address and credential per interval, not one per request; an
oversized body is refused by the edge before any server sees it."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import pytest
import redis
from persona_service.kernel.transport.audit import AuditEntry, FailureTally
from persona_service.kernel.transport.auth import hash_secret
from persona_service.process.app import INVALIDATION_CHANNEL
from sqlalchemy import text
from support import assert_envelope


def _client(http, address: str) -> httpx.Client:
    """A client of its own loopback address (refusals are limited, and audited, per address)."""
    return httpx.Client(base_url=http.base_url, timeout=30, transport=httpx.HTTPTransport(local_address=address))


def _audited_failures(engine, address: str) -> list:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT request_id, details FROM audit_events WHERE client_ip = :ip "
                                      "AND action = 'auth.authenticate' ORDER BY occurred_at"), {"ip": address}))


def test_an_unknown_keys_refusal_is_remembered_until_a_key_with_its_secret_is_created(stack, http, tenants, tenant,
                                                                                      engine):
    unknown = f"sk_live_{uuid.uuid4().hex}"
    with _client(http, "127.0.61.1") as caller:
        assert_envelope(caller.get("/v1/personas", headers={"Authorization": f"Bearer {unknown}"}), 401, "unauthorized")
        # The key appears behind the service's back (no invalidation): the refusal still holds, read from memory.
        made = tenants.tenant_key(tenant, ["personas:read"])
        with engine.begin() as conn:
            conn.execute(text("UPDATE api_keys SET secret_hash = :unknown WHERE secret_hash = :made"),
                         {"unknown": hash_secret(unknown), "made": hash_secret(made)})
        assert caller.get("/v1/personas", headers={"Authorization": f"Bearer {unknown}"}).status_code == 401
        # What creating a key broadcasts (below): every process forgets the refusal at once.
        bus, acks = redis.Redis.from_url(stack.redis_url), f"test-acks-{uuid.uuid4().hex}"
        servers = len(stack.server_ports)  # every server process listens (unary and stream servers)
        assert bus.publish(INVALIDATION_CHANNEL, f"{acks} cred:key:{hash_secret(unknown)}") == servers
        for _ in range(servers):
            assert bus.blpop([acks], timeout=5) is not None  # applied
        assert caller.get("/v1/personas", headers={"Authorization": f"Bearer {unknown}"}).status_code == 200


@pytest.mark.parametrize(("path", "body"), [("/v1/keys", {"name": "new", "scopes": ["personas:read"]}),
                                            ("/v1/auth/scim/tokens", {"name": "IdP"})])
def test_creating_a_key_evicts_a_refusal_of_its_secret_in_every_process(stack, http, tenant, path, body):
    bus = redis.Redis.from_url(stack.redis_url)
    listener = bus.pubsub(ignore_subscribe_messages=True)
    listener.subscribe(INVALIDATION_CHANNEL)
    listener.get_message(timeout=1)
    heard: list[dict] = []

    def listen() -> None:
        """Read the broadcast and confirm it, as a server's listener does: the sender waits for a confirmation
        from each listener its PUBLISH reached (this one too), up to ACK_WAIT_SECONDS (2 s) for a silent one."""
        message = listener.get_message(timeout=5)
        if message is not None:
            heard.append(message)
            bus.rpush(message["data"].decode().partition(" ")[0], 1)

    listening = threading.Thread(target=listen)
    listening.start()
    try:
        made = http.post(path, json=body, headers=tenant.auth)
        assert made.status_code == 200, made.text
        listening.join(10)
        assert heard, "no invalidation broadcast"
        _, _, applied = heard[0]["data"].decode().partition(" ")
        assert applied == "cred:key:" + hash_secret(made.json()["secret"])
    finally:
        listening.join(10)
        listener.close()


def test_a_flood_of_bad_keys_writes_one_audit_row_per_address_and_interval(http, engine):
    with _client(http, "127.0.61.2") as caller:
        refused = [caller.get("/v1/personas", headers={"Authorization": "Bearer sk_live_nope"}) for _ in range(5)]
    assert [r.status_code for r in refused] == [401] * 5
    rows = _audited_failures(engine, "127.0.61.2")
    assert [row.request_id for row in rows] == [refused[0].headers["x-request-id"]]


def test_held_back_failures_are_written_once_their_interval_is_over():
    now = [100.0]  # a clock the test moves: the interval never lapses early on a loaded machine, nor needs a sleep
    tally = FailureTally(every=10, clock=lambda: now[0])
    entry = AuditEntry(action="auth.authenticate", outcome="failure", status=401, request_id="r1", client_ip="10.0.0.1")
    assert tally.admit(entry) == [entry]
    for n in (2, 3, 4):
        assert tally.admit(AuditEntry(**{**entry.__dict__, "request_id": f"r{n}"})) == []
    now[0] += 9.9
    assert tally.due() == []
    now[0] += 0.1
    [summary] = tally.due()
    assert (summary.request_id, summary.details) == ("r4", {"repeated": 3})
    assert tally.due() == []
    other = AuditEntry(**{**entry.__dict__, "client_ip": "10.0.0.2"})
    assert tally.admit(other) == [other]  # another address has its own interval


def test_an_oversized_body_never_reaches_a_server(http, engine):
    """413 even with a bad key: the server, which authenticates first, would answer 401 (and audit it)."""
    body = json.dumps({"name": "k", "scopes": ["personas:read"], "pad": "x" * (5 * 1024 * 1024)})
    with _client(http, "127.0.61.3") as caller:
        r = caller.post("/v1/keys", content=body,
                        headers={"Authorization": "Bearer sk_live_nope", "content-type": "application/json"})
    assert_envelope(r, 413, "payload_too_large")
    assert _audited_failures(engine, "127.0.61.3") == []
