"""The delivery worker idles on PostgreSQL notifications, not polling: an
idle worker issues almost no statements, and new events, replays and
scheduled retries still go out at once (the safety-net timeout is set far
beyond every wait below, so only a wake-up can explain a delivery)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.work import Work
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.outbox import Outbox
from persona_service.webhooks.tables import WebhookDelivery
from persona_service.webhooks.worker import DeliveryWorker
from sqlalchemy import event, select, update
from support import client_for

NO_SAFETY_NET = 120.0  # seconds: longer than any wait in this file


@pytest.fixture(scope="module")
def qhttp(quiet_stack):
    with client_for(quiet_stack) as client:
        yield client


@contextmanager
def running_worker(engine, quiet_stack) -> Iterator[DeliveryWorker]:
    box = SecretBox(Settings(data_dir=quiet_stack.settings.data_dir).resolved_secrets_key())
    worker = DeliveryWorker(engine, box, allow_private=True, timeout=5)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), kwargs={"lanes": 4, "max_idle": NO_SAFETY_NET})
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the worker did not stop within 10 s"


def subscribe(qhttp, tenant, receiver) -> tuple[str, str]:
    path = f"/w-{uuid.uuid4().hex[:10]}"
    r = qhttp.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url(path), "events": ["*"]})
    assert r.status_code == 200, r.text
    return r.json()["endpoint"]["id"], path


def emit(engine, tenant) -> str:
    with engine.begin() as conn:
        return Outbox(Work.on(conn)).emit("persona.updated", tenant.org_id, tenant.workspace_id, {"personaId": "p1"})


def test_an_idle_worker_issues_almost_no_statements(quiet_engine, quiet_stack):
    statements = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731 - the statement text
    with running_worker(quiet_engine, quiet_stack):
        time.sleep(1.0)  # started and settled: every loop has looked once and is waiting
        event.listen(quiet_engine, "before_cursor_execute", listener)
        try:
            time.sleep(2.0)
        finally:
            event.remove(quiet_engine, "before_cursor_execute", listener)
    # Polling every 100 ms, five loops issued hundreds in 2 s; waiting, none.
    assert len(statements) <= 5, statements


def test_a_new_event_is_delivered_at_once(qhttp, quiet_tenants, quiet_engine, quiet_stack, receiver):
    tenant = quiet_tenants()
    _, path = subscribe(qhttp, tenant, receiver)
    with running_worker(quiet_engine, quiet_stack):
        time.sleep(0.5)
        event_id = emit(quiet_engine, tenant)
        [received] = receiver.wait_for(path, timeout=10)
    assert received.event["id"] == event_id


def test_a_replay_is_sent_at_once(qhttp, quiet_tenants, quiet_engine, quiet_stack, receiver):
    tenant = quiet_tenants()
    endpoint_id, path = subscribe(qhttp, tenant, receiver)
    with running_worker(quiet_engine, quiet_stack):
        emit(quiet_engine, tenant)
        receiver.wait_for(path, timeout=10)
        [delivery] = qhttp.get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=tenant.auth).json()["items"]
        r = qhttp.post(f"/v1/webhooks/{endpoint_id}/deliveries/{delivery['id']}/replay", headers=tenant.auth)
        assert r.status_code == 200, r.text
        receiver.wait_for(path, count=2, timeout=10)


def test_a_scheduled_retry_is_sent_when_due(qhttp, quiet_tenants, quiet_engine, quiet_stack, receiver):
    tenant = quiet_tenants()
    endpoint_id, path = subscribe(qhttp, tenant, receiver)
    event_id = emit(quiet_engine, tenant)
    with running_worker(quiet_engine, quiet_stack):
        receiver.wait_for(path, timeout=10)
        due = utcnow() + timedelta(seconds=1.5)
        with quiet_engine.begin() as conn:  # as if the attempt had failed: due again in 1.5 s
            conn.execute(update(WebhookDelivery).where(WebhookDelivery.event_id == event_id)
                         .values(status="pending", next_attempt_at=due, completed_at=None))
        [_, retried] = receiver.wait_for(path, count=2, timeout=10)
    assert retried.at >= due.timestamp() - 0.05
    with quiet_engine.connect() as conn:
        status = conn.execute(select(WebhookDelivery.status).where(WebhookDelivery.endpoint_id == endpoint_id)).scalar()
    assert status == "succeeded"
