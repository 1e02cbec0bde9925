"""An event no endpoint wants costs the webhook worker nothing (migration 0029): it is written already
fanned out (to nobody), without waking the worker, and still listed by the events API. An endpoint created
(or enabled, or subscribed) as an event is written gets the event unless the event committed first: the
two serialize on the workspace's advisory lock, both orders tested here one step at a time, and through the
live stack with persona creations racing the endpoint's creation."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from persona_service.kernel import ids
from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.tables import OutboxEvent
from persona_service.kernel.data.work import Work
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.outbox import Outbox
from persona_service.webhooks.records import NewEndpoint
from persona_service.webhooks.repository import WebhookRepository
from persona_service.webhooks.tables import WebhookDelivery
from persona_service.webhooks.worker import DeliveryWorker
from sqlalchemy import select, text
from support import client_for, wait_until

T0 = utcnow()


@pytest.fixture(scope="module")
def qhttp(quiet_stack):
    with client_for(quiet_stack) as client:
        yield client


@pytest.fixture
def worker(quiet_stack, quiet_engine):
    box = SecretBox(Settings(data_dir=quiet_stack.settings.data_dir).resolved_secrets_key())
    return DeliveryWorker(quiet_engine, box, allow_private=True, timeout=5)


@pytest.fixture
def tenant(quiet_tenants, quiet_engine):
    """A tenant of the quiet stack, whose endpoints and unsent events go with the test (the other tests' workers
    count what they send)."""
    made = quiet_tenants()
    yield made
    with quiet_engine.begin() as conn:
        conn.execute(text("DELETE FROM webhook_endpoints WHERE workspace_id = :w"), {"w": made.workspace_id})
        conn.execute(text("UPDATE events SET dispatched_at = now() WHERE workspace_id = :w AND dispatched_at IS NULL"),
                     {"w": made.workspace_id})


def emit(engine, tenant, type_="persona.updated", data=None) -> str:
    with engine.begin() as conn:
        return Outbox(Work.on(conn)).emit(type_, tenant.org_id, tenant.workspace_id, data or {"personaId": "p1"})


def dispatched(engine, event_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(OutboxEvent.dispatched_at).where(OutboxEvent.id == event_id)).scalar() is not None


def deliveries_of(engine, event_id: str) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(WebhookDelivery.endpoint_id).where(WebhookDelivery.event_id == event_id))
                    .scalars())


def subscribe(qhttp, tenant, receiver, events=("*",)) -> tuple[str, str]:
    path = f"/nosub-{uuid.uuid4().hex[:10]}"
    r = qhttp.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url(path), "events": list(events)})
    assert r.status_code == 200, r.text
    return r.json()["endpoint"]["id"], path


def outbox_notified(quiet_engine, write) -> bool:
    """Whether `write()` (which commits) sends the worker's wake-up."""
    with quiet_engine.connect() as conn:
        conn.execute(text("LISTEN persona_outbox"))
        conn.commit()
        write()
        raw = conn.connection.driver_connection
        notified = any(True for _ in raw.notifies(timeout=0.5, stop_after=1))  # type: ignore[union-attr]
        conn.execute(text("UNLISTEN persona_outbox"))
        conn.commit()
    return notified


def test_an_event_without_endpoints_is_written_fanned_out_and_wakes_nobody(qhttp, tenant, quiet_engine):
    made: list[str] = []
    assert not outbox_notified(quiet_engine, lambda: made.append(emit(quiet_engine, tenant)))
    assert dispatched(quiet_engine, made[0])
    # Still an event: the events API lists it.
    listed = qhttp.get("/v1/events", headers=tenant.auth).json()["items"]
    assert made[0] in [e["id"] for e in listed]


def test_only_an_endpoint_that_wants_the_event_leaves_it_to_the_worker(qhttp, quiet_tenants, tenant, quiet_engine,
                                                                       receiver, worker):
    other = quiet_tenants()
    endpoint_id, path = subscribe(qhttp, tenant, receiver, ["persona.created"])
    subscribe(qhttp, other, receiver)  # another organization's endpoint wants everything: not this one's events
    unwanted = emit(quiet_engine, tenant, "persona.updated")
    assert dispatched(quiet_engine, unwanted)
    made: list[str] = []
    assert outbox_notified(quiet_engine, lambda: made.append(emit(quiet_engine, tenant, "persona.created")))
    assert not dispatched(quiet_engine, made[0])
    worker.run_once(T0)
    assert [r.event["id"] for r in receiver.wait_for(path)] == made
    assert deliveries_of(quiet_engine, unwanted) == []
    # Disabled, it wants nothing but a ping (which goes to the endpoint it names, enabled or not).
    assert qhttp.patch(f"/v1/webhooks/{endpoint_id}", headers=tenant.auth, json={"enabled": False}).status_code == 200
    assert dispatched(quiet_engine, emit(quiet_engine, tenant, "persona.created"))
    r = qhttp.post(f"/v1/webhooks/{endpoint_id}/ping", headers=tenant.auth, json={})
    assert r.status_code == 200, r.text
    with quiet_engine.connect() as conn:
        ping = conn.execute(select(OutboxEvent.id).where(OutboxEvent.workspace_id == tenant.workspace_id,
                                                         OutboxEvent.type == "webhook.endpoint.test_ping")).scalar_one()
    assert not dispatched(quiet_engine, ping)
    worker.run_once(T0)
    assert deliveries_of(quiet_engine, ping) == [endpoint_id]


def _new_endpoint(tenant, receiver, path: str) -> NewEndpoint:
    now = utcnow()
    return NewEndpoint(id=ids.new_id("webhook_endpoint"), org_id=tenant.org_id, workspace_id=tenant.workspace_id,
                       url=receiver.url(path), description="", events=["*"], enabled=True, standard_webhooks=False,
                       secret_enc="x", secret_created_at=now, created_at=now, updated_at=now)


def _waiting_for_advisory_lock(engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"))
                    .scalar())


def _eventually(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_an_event_written_while_an_endpoint_is_being_created_waits_for_it_and_goes_to_it(
        tenant, quiet_engine, receiver):
    path = f"/race-{uuid.uuid4().hex[:8]}"
    with quiet_engine.connect() as creating:
        creating.begin()
        # Uncommitted: the event's check cannot see it yet.
        WebhookRepository(creating).create(_new_endpoint(tenant, receiver, path))
        made: list[str] = []
        writer = threading.Thread(target=lambda: made.append(emit(quiet_engine, tenant)))
        writer.start()
        assert _eventually(lambda: _waiting_for_advisory_lock(quiet_engine)), "the event did not wait"
        assert writer.is_alive()
        creating.commit()
    writer.join(timeout=10)
    assert made and not dispatched(quiet_engine, made[0])  # left for the worker: the endpoint wants it


def test_an_endpoint_created_while_an_event_is_being_written_waits_for_it(tenant, quiet_engine, receiver):
    with quiet_engine.connect() as writing:
        writing.begin()
        outbox = Outbox(Work.on(writing))
        event_id = outbox.emit("persona.updated", tenant.org_id, tenant.workspace_id, {"personaId": "p"})
        outbox.flush()  # its row (and the check's lock) now, as the commit would write it first
        created = threading.Event()

        def create() -> None:
            with quiet_engine.begin() as conn:
                WebhookRepository(conn).create(_new_endpoint(tenant, receiver, "/late"))
            created.set()

        creator = threading.Thread(target=create)
        creator.start()
        assert _eventually(lambda: _waiting_for_advisory_lock(quiet_engine)), "the endpoint's creation did not wait"
        assert not created.is_set()
        writing.commit()
    creator.join(timeout=10)
    assert created.is_set()
    # The event committed before the endpoint existed: nothing was owed to it.
    assert dispatched(quiet_engine, event_id)


def test_enabling_an_endpoint_serializes_with_events_as_creating_one_does(qhttp, tenant, quiet_engine,
                                                                         receiver):
    endpoint_id, _ = subscribe(qhttp, tenant, receiver)
    assert qhttp.patch(f"/v1/webhooks/{endpoint_id}", headers=tenant.auth, json={"enabled": False}).status_code == 200
    with quiet_engine.connect() as enabling:
        enabling.begin()
        enabling.execute(text("UPDATE webhook_endpoints SET enabled = true WHERE id = :id"), {"id": endpoint_id})
        made: list[str] = []
        writer = threading.Thread(target=lambda: made.append(emit(quiet_engine, tenant)))
        writer.start()
        assert _eventually(lambda: _waiting_for_advisory_lock(quiet_engine)), "the event did not wait"
        enabling.commit()
    writer.join(timeout=10)
    assert made and not dispatched(quiet_engine, made[0])
    # A change that subscribes to nothing new (a description) takes no lock.
    with quiet_engine.begin() as conn:
        conn.execute(text("UPDATE webhook_endpoints SET description = 'd' WHERE id = :id"), {"id": endpoint_id})
        assert not conn.execute(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                     "AND pid = pg_backend_pid()")).scalar()


def test_an_event_in_a_repeatable_read_transaction_is_left_to_the_worker(tenant, quiet_engine):
    with quiet_engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            event_id = Outbox(Work.on(conn)).emit("persona.updated", tenant.org_id, tenant.workspace_id, {"personaId": "p"})
    assert not dispatched(quiet_engine, event_id)


def test_persona_creations_racing_an_endpoints_creation_lose_nothing(stack, http, tenants, receiver):
    """Through the live stack (its own worker process): persona creations run while the endpoint is created;
    every one that started after the endpoint's creation was answered reaches it, once."""
    tenant = tenants()
    path = f"/racing-{uuid.uuid4().hex[:8]}"
    answered_at: list[float] = []
    created: list[tuple[float, str]] = []
    stop = threading.Event()

    def create_personas() -> None:
        with client_for(stack) as client:
            i = 0
            while not stop.is_set():
                started = time.monotonic()
                r = client.post("/v1/personas", headers=tenant.auth, json={"intent": f"A ferry pilot number {i}"})
                assert r.status_code == 200, r.text
                created.append((started, r.json()["id"]))
                i += 1

    writers = [threading.Thread(target=create_personas) for _ in range(2)]
    for w in writers:
        w.start()
    wait_until(lambda: created, 60, "persona creations under way before the endpoint's")
    r = http.post("/v1/webhooks", headers=tenant.auth, json={"url": receiver.url(path), "events": ["persona.created"]})
    assert r.status_code == 200, r.text
    answered_at.append(time.monotonic())
    wait_until(lambda: sum(started > answered_at[0] for started, _ in created) >= 4, 60,
               "persona creations started after the endpoint's was answered")
    stop.set()
    for w in writers:
        w.join(timeout=30)
    owed = {persona for started, persona in created if started > answered_at[0]}
    assert owed, "no persona creation started after the endpoint's"
    got: set[str] = set()
    deadline = time.monotonic() + 30
    while not owed <= got and time.monotonic() < deadline:
        got = {r.event["data"]["personaId"] for r in receiver.at(path)}
        time.sleep(0.1)
    assert owed <= got, f"{len(owed - got)} of {len(owed)} owed events not delivered"
    ids_ = [r.event["id"] for r in receiver.at(path)]
    assert len(ids_) == len(set(ids_))

