"""The delivery worker, driven in-process with an injected clock against a
stack that runs no worker of its own: the full retry schedule with attempt
records and dead-lettering, Retry-After, replay, rotation grace signatures,
SSRF refusal, concurrent workers, and a worker process SIGKILLed
mid-delivery losing nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks
from persona_sdk.webhooks import verify as verify_signature
from persona_service.kernel.data.partitions_repository import MonthlyPartitions, month_after
from persona_service.kernel.data.work import Work
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.outbox import Outbox
from persona_service.webhooks.http import HTTPError
from persona_service.webhooks.metrics import DELIVERIES
from persona_service.webhooks.service import DestinationRefused, check_destination, url_violation
from persona_service.webhooks.tables import WebhookDelivery, WebhookEndpoint
from persona_service.webhooks.worker import DeliveryWorker
from sqlalchemy import select, update
from support import assert_envelope, client_for
from wh_receiver import Answer

T0 = datetime(2031, 1, 1, tzinfo=UTC)  # far ahead: nothing of the real clock's is ever due then by accident


@pytest.fixture(scope="session")  # (the scope of the conftest's, which session fixtures take)
def quiet_engine(quiet_engine):
    """The stack's engine, with the months of T0 made for the attempts the worker records then
    (`webhook_attempts` is partitioned by `attempted_at`, migration 0034: the job keeps months ahead of the
    real clock only)."""
    with quiet_engine.begin() as conn:
        partitions, start = MonthlyPartitions(conn, "webhook_attempts"), T0
        for _ in range(2):
            partitions.make(start, month_after(start))
            start = month_after(start)
    return quiet_engine


@pytest.fixture(scope="module")
def qhttp(quiet_stack):
    with client_for(quiet_stack) as client:
        yield client


@pytest.fixture(scope="module")
def box(quiet_stack):
    return SecretBox(Settings(data_dir=quiet_stack.settings.data_dir).resolved_secrets_key())


@pytest.fixture
def worker(quiet_engine, box):
    return DeliveryWorker(quiet_engine, box, allow_private=True, timeout=5)


def new_endpoint(qhttp, tenant, receiver, events=("*",)):
    p = f"/q-{uuid.uuid4().hex[:10]}"
    r = qhttp.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url(p), "events": list(events)})
    assert r.status_code == 200, r.text
    return r.json(), p


def emit(engine, tenant, type_="persona.updated", n=1) -> list[str]:
    with engine.begin() as conn:
        return [Outbox(Work.on(conn)).emit(type_, tenant.org_id, tenant.workspace_id, {"personaId": f"p{i}"}) for i in range(n)]


def deliveries(engine, endpoint_id):
    with engine.connect() as conn:
        rows = conn.execute(select(WebhookDelivery.__table__).where(WebhookDelivery.endpoint_id == endpoint_id)
                            .order_by(WebhookDelivery.created_at)).mappings().all()
    return rows


def test_full_retry_schedule_then_dead_letter_then_replay(qhttp, quiet_tenants, quiet_engine, receiver, worker):
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    receiver.routes[p] = lambda r: Answer(500, b"x" * 3000)
    [event_id] = emit(quiet_engine, t)

    now = T0
    assert worker.run_once(now) == 1
    offsets = [60, 120, 300, 1800, 7200]  # the spec's schedule, after each failure
    for i, delay in enumerate(offsets, start=2):
        [d] = deliveries(quiet_engine, made["endpoint"]["id"])
        assert d["status"] == "pending" and d["attempt_count"] == i - 1
        assert d["next_attempt_at"] == now + timedelta(seconds=delay)
        assert worker.run_once(now + timedelta(seconds=delay - 1)) == 0  # not due yet
        now += timedelta(seconds=delay)
        assert worker.run_once(now) == 1
    [d] = deliveries(quiet_engine, made["endpoint"]["id"])
    assert d["status"] == "dead_lettered" and d["attempt_count"] == 6 and d["next_attempt_at"] is None
    assert worker.run_once(now + timedelta(days=30)) == 0
    got = receiver.at(p)
    assert len(got) == 6 and {r.event["id"] for r in got} == {event_id}
    assert [r.headers["x-service-delivery-attempt"] for r in got] == ["1", "2", "3", "4", "5", "6"]

    # Listed with every attempt, under the dead_lettered filter.
    r = qhttp.get(f"/v1/webhooks/{made['endpoint']['id']}/deliveries", headers=t.auth, params={"status": "dead_lettered"})
    assert r.status_code == 200, r.text
    [listed] = r.json()["items"]
    assert listed["status"] == "dead_lettered" and listed["attemptCount"] == 6 and listed["eventId"] == event_id
    attempts = listed["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3, 4, 5, 6]
    assert all(a["statusCode"] == 500 and a["success"] is False and len(a["responseBody"]) == 1024 for a in attempts)
    assert all(isinstance(a["latencyMs"], int) for a in attempts)
    times = [datetime.fromisoformat(a["attemptedAt"].replace("Z", "+00:00")) for a in attempts]
    assert [int((b - a).total_seconds()) for a, b in zip(times, times[1:])] == offsets
    assert qhttp.get(f"/v1/webhooks/{made['endpoint']['id']}/deliveries", headers=t.auth,
                     params={"status": "pending"}).json()["items"] == []

    # Replay: same event id, a new delivery; the receiver now accepts.
    receiver.routes[p] = lambda r: Answer(204, b"")
    r = qhttp.post(f"/v1/webhooks/{made['endpoint']['id']}/deliveries/{listed['id']}/replay", headers=t.auth, json={})
    assert r.status_code == 200, r.text
    replay = r.json()
    assert replay["eventId"] == event_id and replay["replayOf"] == listed["id"] and replay["attemptCount"] == 0
    assert worker.run_once() == 1
    last = receiver.at(p)[-1]
    assert last.event["id"] == event_id and last.headers["x-service-delivery-id"] == replay["id"]
    statuses = {d["id"]: d["status"] for d in deliveries(quiet_engine, made["endpoint"]["id"])}
    assert statuses == {listed["id"]: "dead_lettered", replay["id"]: "succeeded"}


def test_timeouts_and_connection_errors_are_failures(qhttp, quiet_tenants, quiet_engine, receiver, box):
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    receiver.routes[p] = lambda r: Answer(200, delay=2.5)
    emit(quiet_engine, t)
    fast = DeliveryWorker(quiet_engine, box, allow_private=True, timeout=1)
    timeouts = DELIVERIES.labels("timeout")._value.get()
    fast.run_once(T0)
    assert DELIVERIES.labels("timeout")._value.get() == timeouts + 1  # persona_webhook_deliveries_total
    [d] = deliveries(quiet_engine, made["endpoint"]["id"])
    assert d["status"] == "pending" and d["attempt_count"] == 1
    r = qhttp.get(f"/v1/webhooks/{made['endpoint']['id']}/deliveries", headers=t.auth).json()
    assert r["items"][0]["attempts"][0]["error"] == "timeout" and r["items"][0]["attempts"][0]["statusCode"] == 0

    # A closed port: connection error.
    with quiet_engine.begin() as conn:
        conn.execute(update(WebhookEndpoint).where(WebhookEndpoint.id == made["endpoint"]["id"])
                     .values(url="http://127.0.0.1:9/closed"))
    fast.run_once(T0 + timedelta(minutes=1))
    r = qhttp.get(f"/v1/webhooks/{made['endpoint']['id']}/deliveries", headers=t.auth).json()
    assert r["items"][0]["attempts"][1]["error"] == "connection_error"


def test_retry_after_is_honoured_when_longer(qhttp, quiet_tenants, quiet_engine, receiver, worker):
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    receiver.routes[p] = lambda r: Answer(429, headers={"Retry-After": "900"})
    emit(quiet_engine, t)
    worker.run_once(T0)
    [d] = deliveries(quiet_engine, made["endpoint"]["id"])
    assert d["next_attempt_at"] == T0 + timedelta(seconds=900)  # not the scheduled 60 s
    receiver.routes[p] = lambda r: Answer(503, headers={"Retry-After": "5"})  # shorter: the schedule wins
    worker.run_once(T0 + timedelta(seconds=900))
    [d] = deliveries(quiet_engine, made["endpoint"]["id"])
    assert d["next_attempt_at"] == T0 + timedelta(seconds=900 + 120)


def test_rotation_grace_signs_with_both_secrets(qhttp, quiet_tenants, quiet_engine, receiver, worker, box):
    t = quiet_tenants()
    admin = quiet_tenants(platform_admin=True)
    made, p = new_endpoint(qhttp, t, receiver)
    endpoint_id, old = made["endpoint"]["id"], made["secret"]
    with quiet_engine.begin() as conn:
        conn.execute(update(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id)
                     .values(secret_created_at=datetime.now(UTC) - timedelta(days=91), standard_webhooks=True))
    assert_envelope(qhttp.post("/v1/admin/webhooks/rotate-secrets", headers=t.auth, json={}), 403, "forbidden")
    r = qhttp.post("/v1/admin/webhooks/rotate-secrets", headers=admin.auth, json={})
    assert r.status_code == 200, r.text
    results = {x["endpointId"]: x for x in r.json()["results"]}
    assert results[endpoint_id]["outcome"] == "rotated" and results[endpoint_id]["orgId"] == t.org_id
    assert old not in r.text
    # A second cycle rotates nothing new.
    again = qhttp.post("/v1/admin/webhooks/rotate-secrets", headers=admin.auth, json={}).json()
    assert {x["endpointId"]: x for x in again["results"]}[endpoint_id]["outcome"] == "current"

    with quiet_engine.connect() as conn:
        row = conn.execute(select(WebhookEndpoint.__table__).where(WebhookEndpoint.id == endpoint_id)).mappings().one()
    assert old not in row["secret_enc"] and box.open(row["previous_secret_enc"]) == old
    new = box.open(row["secret_enc"])
    assert new.startswith("whsec_") and new != old
    got = qhttp.get(f"/v1/webhooks/{endpoint_id}", headers=t.auth).json()
    assert "previousSecretExpiresAt" in got

    now = datetime.now(UTC)
    emit(quiet_engine, t)
    worker.run_once(now)
    req = receiver.wait_for(p)[-1]
    header = req.headers["x-service-signature"]
    assert header.count("v1=") == 2
    assert verify_signature(req.body, header, [old], now=now.timestamp())
    assert verify_signature(req.body, header, [new], now=now.timestamp())
    assert not verify_signature(req.body, header, ["whsec_other"], now=now.timestamp())
    # Standard Webhooks: one space-separated `v1,` per secret; receivers holding either verify.
    assert req.headers["webhook-signature"].count("v1,") == 2
    for secret in (old, new):
        assert standardwebhooks.Webhook(secret).verify(req.body, dict(req.headers))

    # After the grace (7 days), only the new secret signs.
    later = now + timedelta(seconds=604800 + 1)
    emit(quiet_engine, t)
    worker.run_once(later)
    req = receiver.wait_for(p, 2)[-1]
    header = req.headers["x-service-signature"]
    assert header.count("v1=") == 1
    assert verify_signature(req.body, header, [new], now=later.timestamp())
    assert not verify_signature(req.body, header, [old], now=later.timestamp())


def test_ssrf_refusals_with_the_switch_off():
    def resolver(table):
        return lambda host, port: table[host]

    refused = {
        "http://example.com/h": "https_required",
        "ftp://example.com/h": "https_required",
        "https://127.0.0.1/h": "private_address",
        "https://10.1.2.3/h": "private_address",
        "https://192.168.0.10:8443/h": "private_address",
        "https://169.254.169.254/latest/meta-data": "private_address",
        "https://[::1]/h": "private_address",
        "https://[::ffff:127.0.0.1]/h": "private_address",
        "https://[fd00:ec2::254]/h": "private_address",
        # IPv6 forms embedding loopback or the metadata address.
        "https://[64:ff9b::7f00:1]/h": "private_address",  # NAT64
        "https://[64:ff9b::a9fe:a9fe]/h": "private_address",  # NAT64 → 169.254.169.254
        "https://[64:ff9b:1::7f00:1]/h": "private_address",  # NAT64 local-use prefix
        "https://[2002:7f00:1::]/h": "private_address",  # 6to4
        "https://[::127.0.0.1]/h": "private_address",  # IPv4-compatible
        "https://[::ffff:0:7f00:1]/h": "private_address",  # IPv4-translated
        "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h": "private_address",  # Teredo
        "https://v6embedded.example/h": "private_address",  # resolves to NAT64 of loopback
        "https://100.64.0.1/h": "private_address",
        "https://0.0.0.0/h": "private_address",
        "https://internal.example/h": "private_address",  # resolves to a private address
        "https://mixed.example/h": "private_address",  # one of its addresses is private
        "https://user:pw@example.com/h": "credentials_in_url",
    }
    table = {"internal.example": ["10.0.0.5"], "mixed.example": ["93.184.216.34", "127.0.0.1"],
             "v6embedded.example": ["64:ff9b::7f00:1"],
             "example.com": ["93.184.216.34"]}

    def resolve(host, port):
        if host not in table:
            raise OSError("no such host")
        return table[host]

    for url, reason in refused.items():
        with pytest.raises(DestinationRefused) as info:
            check_destination(url, allow_private=False, resolve=resolve)
        assert info.value.reason == reason, url
        assert url_violation(url, allow_private=False, resolve=resolve).code == reason
    check_destination("https://example.com/h", allow_private=False, resolve=resolve)
    check_destination("https://93.184.216.34/h", allow_private=False, resolve=resolve)
    check_destination("https://[2606:4700::1111]/h", allow_private=False, resolve=resolve)
    # A host without DNS yet: registration accepts it, delivery (connect time) refuses it.
    with pytest.raises(DestinationRefused) as info:
        check_destination("https://nxdomain.example/h", allow_private=False, resolve=resolve)
    assert info.value.reason == "unresolvable_host"
    assert url_violation("https://nxdomain.example/h", allow_private=False, resolve=resolve) is None
    # The real resolver: localhost is loopback.
    with pytest.raises(DestinationRefused):
        check_destination("https://localhost/h", allow_private=False)
    # The switch (local development, tests) lets private and http through.
    check_destination("http://127.0.0.1:8080/h", allow_private=True)


def test_worker_refuses_private_destination_at_delivery_time(qhttp, quiet_tenants, quiet_engine, receiver, box):
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)  # accepted: the server runs with the switch on
    emit(quiet_engine, t)
    strict = DeliveryWorker(quiet_engine, box, allow_private=False)
    strict.run_once(T0)
    assert receiver.at(p) == []
    [d] = deliveries(quiet_engine, made["endpoint"]["id"])
    assert d["status"] == "pending" and d["attempt_count"] == 1
    items = qhttp.get(f"/v1/webhooks/{made['endpoint']['id']}/deliveries", headers=t.auth).json()["items"]
    assert items[0]["attempts"][0]["error"] == "destination_refused"


def test_new_connections_go_only_to_addresses_vetted_at_connect_time(quiet_engine, box):
    """DNS rebinding: whatever the name resolved to when the URL was checked,
    a new connection is vetted again and made to exactly the vetted
    addresses, so a name that now points at loopback is refused."""
    answers = {"rebind.example": ["127.0.0.1"], "public.example": ["93.184.216.34"]}
    strict = DeliveryWorker(quiet_engine, box, allow_private=False, resolve=lambda host, port: answers[host])
    with pytest.raises(HTTPError, match="private_address"):
        strict._connect_addresses("rebind.example", 443)
    assert strict._connect_addresses("public.example", 443) == ["93.184.216.34"]


def test_two_workers_never_deliver_the_same_delivery_concurrently(qhttp, quiet_tenants, quiet_engine, receiver, box):
    import threading

    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    receiver.routes[p] = lambda r: Answer(200, delay=0.01)
    ids = set(emit(quiet_engine, t, n=300))
    workers = [DeliveryWorker(quiet_engine, box, allow_private=True, batch_size=25) for _ in range(3)]
    threads = [threading.Thread(target=w.run_once, args=(T0,)) for w in workers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = [r.event["id"] for r in receiver.at(p)]
    assert [d for d in deliveries(quiet_engine, made["endpoint"]["id"]) if d["status"] != "succeeded"] == []
    assert sorted(got) == sorted(ids)  # every event exactly once: no delivery was sent by two workers
    assert sum(w.delivered for w in workers) == 300


def test_sigkilled_worker_loses_nothing(qhttp, quiet_stack, quiet_tenants, quiet_engine, receiver, box):
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    arrived = []

    def slow(request):
        arrived.append(request.event["id"])
        return Answer(200, delay=3)

    receiver.routes[p] = slow
    ids = set(emit(quiet_engine, t, n=40))
    env = {**quiet_stack.process_env(), "PERSONA_WEBHOOK_LANES": "2"}
    log = open(quiet_stack.log_dir / "killed-worker.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "persona_service.cli", "worker"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(arrived) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(arrived) >= 3
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-delivery: POSTs in flight, nothing recorded yet
        proc.wait()
    rows = deliveries(quiet_engine, made["endpoint"]["id"])
    assert len(rows) == len(ids)  # the fan-out had committed
    assert {(d["status"], d["attempt_count"]) for d in rows} == {("pending", 0)}  # released as they were, due

    receiver.routes[p] = lambda r: Answer(200)
    survivor = DeliveryWorker(quiet_engine, box, allow_private=True)
    assert survivor.run_once() == len(ids)
    rows = deliveries(quiet_engine, made["endpoint"]["id"])
    assert {d["status"] for d in rows} == {"succeeded"}
    assert {r.event["id"] for r in receiver.at(p)} == ids  # every event arrived (some twice: at least once)


def test_killed_before_fan_out_commit_loses_nothing(qhttp, quiet_tenants, quiet_engine, receiver, box):
    """A fan-out that dies before committing leaves its events undispatched."""
    t = quiet_tenants()
    made, p = new_endpoint(qhttp, t, receiver)
    ids = set(emit(quiet_engine, t, n=5))
    dying = DeliveryWorker(quiet_engine, box, allow_private=True)
    conn = quiet_engine.connect()
    trans = conn.begin()
    from persona_service.webhooks.repository import DeliveryQueue

    queue = DeliveryQueue(conn)
    seqs = queue.lock_undispatched(100)
    assert seqs
    # Meanwhile another worker skips the locked events rather than duplicating them.
    assert dying.fan_out(T0) == 0
    trans.rollback()  # the "crash"
    conn.close()
    survivor = DeliveryWorker(quiet_engine, box, allow_private=True)
    survivor.run_once(T0)
    assert {r.event["id"] for r in receiver.at(p)} == ids
