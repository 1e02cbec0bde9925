"""The webhook delivery worker (`persona-service worker`).

Two steps, both on PostgreSQL row locks (FOR UPDATE SKIP LOCKED), so any
number of workers can run side by side:

1. Fan-out: lock a batch of undispatched outbox events, insert one
   `webhook_deliveries` row per subscribed endpoint, mark the events
   dispatched, commit. A worker killed before the commit leaves the events
   undispatched (and locks released), so another takes them; the unique
   (endpoint, event) index makes a repeat harmless. An event no endpoint
   wants never gets here: it is written already dispatched, and wakes no
   worker (migration 0029; an endpoint's creation and an event's write
   serialize per workspace, so nothing racing is lost).
2. Delivery: lock a batch of due `pending` deliveries and keep the
   transaction open while POSTing them concurrently (keep-alive HTTP/1.1,
   `persona_service.webhooks.http`); then
   record every attempt and each delivery's next state in the same
   transaction and commit. While the rows are locked no other worker can
   claim them (the same attempt never runs twice at once); a worker killed
   at any point rolls back, releasing them as they were, due, so they are
   sent again (at least once: receivers dedupe on the event id).

An idle worker costs next to nothing: it waits for PostgreSQL notifications
(triggers on `events` and `webhook_deliveries` inserts and updates, see
migration 0014) and for the earliest scheduled retry, with a long safety-net
timeout, instead of polling.

Time is injectable (`run_once(now=...)`): the retry schedule is tested by
moving the clock, never by changing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import logging
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from persona.v1 import events_pb2
from sqlalchemy import Connection, Engine

from persona_service.kernel.api import (
    SecretBox,
    connection_lost,
    listening,
    message_json,
    new_ids,
    span,
    struct,
    timestamp,
    utcnow,
)
from persona_service.webhooks.http import HTTPClient, HTTPError, resolve_host
from persona_service.webhooks.metrics import DELIVERIES, DELIVERY_SECONDS, outcome_of
from persona_service.webhooks.records import AttemptRecord, DeliveryOutcome, DueDelivery, Subscription
from persona_service.webhooks.repository import DeliveryQueue
from persona_service.webhooks.service import (
    DELIVERY_TIMEOUT_SECONDS,
    RESPONSE_BODY_LIMIT,
    DestinationRefused,
    Resolver,
    check_destination,
    retry_delay,
    valid_secrets,
    vetted_addresses,
)
from persona_service.webhooks.signing import SIGNATURE_HEADER, signature_header, standard_webhook_headers

log = logging.getLogger("persona_service.webhooks")

# What the triggers of migration 0014 notify: new events (that an endpoint wants: 0029), new or updated deliveries.
WAKE_CHANNELS = ("persona_outbox", "persona_webhook_deliveries")
# The longest an idle loop waits without a notification: only a safety net
# (e.g. an endpoint re-enabled with deliveries pending, which no trigger sees).
MAX_IDLE_SECONDS = 10.0
# The longest the listener waits between tries to LISTEN again while PostgreSQL is away: notifications are back
# within it of PostgreSQL's return (the loops' idle wait would be up to MAX_IDLE_SECONDS otherwise).
LISTEN_RETRY_SECONDS = 1.0


class Wakeups:
    """Wakes the worker's idle loops. `generation` counts wake-ups, so a loop
    that found nothing waits only if nothing arrived since it looked."""

    def __init__(self) -> None:
        self.generation = 0
        self._event = asyncio.Event()

    def notify(self) -> None:
        self.generation += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, seen: int, timeout: float) -> None:
        if self.generation != seen or timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)

USER_AGENT = "PersonaService-Webhooks/1"


@dataclass
class Attempt:
    delivery_id: str
    attempt: int
    status_code: int = 0
    latency_ms: int = 0
    body: str = ""
    error: str = ""
    retry_after: float | None = None

    @property
    def success(self) -> bool:
        return 200 <= self.status_code < 300 and not self.error


def envelope(row: DueDelivery) -> bytes:
    """The event exactly as GET /v1/events/{id} prints it (the same message,
    printed as the transcoder prints it): one form per field, whichever way it
    is read."""
    message = events_pb2.Event(
        id=row.event_id, type=row.type, occurred_at=timestamp(row.occurred_at), org_id=row.org_id,
        workspace_id=row.workspace_id, data=struct(row.data),
    )
    return json.dumps(message_json(message), separators=(",", ":"), ensure_ascii=False).encode()


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


@functools.cache
def _tls_context() -> ssl.SSLContext:
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class DeliveryWorker:
    def __init__(
        self, engine: Engine, box: SecretBox, *, allow_private: bool = False, batch_size: int = 200,
        fanout_batch: int = 1000, max_connections: int = 64, timeout: float = DELIVERY_TIMEOUT_SECONDS,
        resolve: Resolver = resolve_host, dns_cache_seconds: float = 30.0, retention_days: int = 0,
    ):
        self.engine = engine
        self.retention_days = retention_days  # PERSONA_WEBHOOK_DELIVERY_RETENTION_DAYS (0: kept forever)
        self.box = box
        self.allow_private = allow_private
        self.batch_size = batch_size
        self.fanout_batch = fanout_batch
        self.max_connections = max_connections
        self.timeout = timeout
        self.resolve = resolve
        self.dns_cache_seconds = dns_cache_seconds
        self._destinations: dict[str, tuple[float, str | None]] = {}
        self.delivered = 0
        self.failed = 0

    # --- fan-out ------------------------------------------------------------------

    def fan_out(self, now: datetime | None = None) -> int:
        """Fan out one batch of undispatched events; returns how many events."""
        now = now or utcnow()
        with self.engine.begin() as conn:
            queue = DeliveryQueue(conn)
            seqs = queue.lock_undispatched(self.fanout_batch)
            if not seqs:
                return 0
            subscriptions = self._within_retention(queue.subscribers(seqs), now)
            queue.add_deliveries(new_ids("webhook_delivery", len(subscriptions)), subscriptions, now)
            queue.mark_dispatched(seqs, now)
        return len(seqs)

    def _within_retention(self, subscriptions: list[Subscription], now: datetime) -> list[Subscription]:
        """Those whose event is younger than the deliveries' retention: a delivery's partition is its event's
        month (migration 0034), which may be dropped already for an event fanned out that late (a worker
        down for weeks); such an event is marked dispatched without deliveries, as it would age out at once."""
        if not self.retention_days:
            return subscriptions
        oldest = now - timedelta(days=self.retention_days)
        return [s for s in subscriptions if s.occurred_at >= oldest]

    # --- delivery -------------------------------------------------------------------

    def client(self) -> HTTPClient:
        return HTTPClient(
            self.max_connections, keepalive_expiry=30.0, ssl_context=_tls_context(), user_agent=USER_AGENT,
            addresses=self._connect_addresses,
        )

    def _connect_addresses(self, host: str, port: int) -> list[str]:
        """Where a new connection may go: vetted now, connected to as is."""
        try:
            return vetted_addresses(host, port, allow_private=self.allow_private, resolve=self.resolve)
        except DestinationRefused as refused:
            raise HTTPError(f"destination refused: {refused.reason}") from None

    async def deliver_batch(self, client: HTTPClient, now: datetime | None = None) -> int:
        """Claim, send and record one batch of due deliveries; returns how many."""
        now = now or utcnow()
        conn = await asyncio.to_thread(self._begin)
        try:
            rows = await asyncio.to_thread(DeliveryQueue(conn).claim_due, now, self.batch_size)
            if not rows:
                return 0
            attempts = await asyncio.gather(*(self._send(client, row, now) for row in rows))
            await asyncio.to_thread(self._record, conn, attempts, now)
            return len(rows)
        finally:
            await asyncio.to_thread(conn.close)  # rolls back unless recorded and committed

    def _begin(self) -> Connection:
        conn = self.engine.connect()
        conn.begin()
        return conn

    def _record(self, conn: Connection, attempts: list[Attempt], now: datetime) -> None:
        rows = [AttemptRecord(a.delivery_id, a.attempt, now, a.status_code, a.latency_ms, a.body, a.error, a.success)
                for a in attempts]
        DeliveryQueue(conn).record(rows, [self._outcome(a, now) for a in attempts])
        conn.commit()

    def _outcome(self, a: Attempt, now: datetime) -> DeliveryOutcome:
        """The delivery's state after attempt `a` (counted as delivered or failed)."""
        last_status_code = a.status_code or None
        if a.success:
            self.delivered += 1
            return DeliveryOutcome(a.delivery_id, "succeeded", a.attempt, None, last_status_code, now)
        self.failed += 1
        delay = retry_delay(a.attempt, a.retry_after)
        if delay is None:
            return DeliveryOutcome(a.delivery_id, "dead_lettered", a.attempt, None, last_status_code, now)
        return DeliveryOutcome(a.delivery_id, "pending", a.attempt, now + timedelta(seconds=delay), last_status_code,
                               None)

    async def _send(self, client: HTTPClient, row: DueDelivery, now: datetime) -> Attempt:
        with span("webhook.deliver", **{"webhook.delivery_id": row.id, "webhook.event_type": row.type}) as current:
            attempt = await self._attempt(client, row, now)
            if current is not None:
                current.set_attribute("webhook.outcome", outcome_of(attempt.status_code, attempt.error))
            return attempt

    async def _attempt(self, client: HTTPClient, row: DueDelivery, now: datetime) -> Attempt:
        attempt = Attempt(row.id, row.attempt_count + 1)
        started = time.monotonic()
        try:
            refused = await self._refused(row.url)
            if refused is not None:
                attempt.error = "destination_refused"
                attempt.body = refused
                return attempt
            body = envelope(row)
            secrets, stamp = valid_secrets(row, self.box, now), int(now.timestamp())
            headers = {
                "Content-Type": "application/json",
                "X-Service-Event-Id": row.event_id,
                "X-Service-Event-Type": row.type,
                "X-Service-Delivery-Id": row.id,
                "X-Service-Delivery-Attempt": str(attempt.attempt),
                SIGNATURE_HEADER: signature_header(body, secrets, stamp),
            }
            if row.standard_webhooks:
                headers.update(standard_webhook_headers(body, secrets, row.event_id, stamp))
            async with client.slot():  # the timeout runs from here: waiting for a connection is not the receiver's
                started = time.monotonic()
                response = await asyncio.wait_for(
                    client.post(row.url, body, headers, RESPONSE_BODY_LIMIT), self.timeout)
            attempt.status_code = response.status_code
            attempt.retry_after = parse_retry_after(response.headers.get("retry-after"), now)
            attempt.body = response.body.decode("utf-8", "replace")
        except TimeoutError:
            attempt.error = "timeout"
        except (HTTPError, OSError) as exc:
            attempt.error = "connection_error"
            attempt.body = (str(exc) or type(exc).__name__)[:RESPONSE_BODY_LIMIT]
        except Exception as exc:  # noqa: BLE001 - a bad row must not sink the batch
            log.exception("delivery %s failed unexpectedly", row.id)
            attempt.error = "internal_error"
            attempt.body = type(exc).__name__
        finally:
            attempt.latency_ms = int((time.monotonic() - started) * 1000)
            DELIVERIES.labels(outcome_of(attempt.status_code, attempt.error)).inc()
            DELIVERY_SECONDS.observe(time.monotonic() - started)
        return attempt

    async def _refused(self, url: str) -> str | None:
        """The reason a destination is refused now (SSRF check at delivery
        time, DNS answers cached briefly), or None."""
        cached = self._destinations.get(url)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        try:
            await asyncio.to_thread(check_destination, url, allow_private=self.allow_private, resolve=self.resolve)
            reason = None
        except DestinationRefused as refused:
            reason = refused.reason
        if len(self._destinations) > 10_000:
            self._destinations.clear()
        self._destinations[url] = (time.monotonic() + self.dns_cache_seconds, reason)
        return reason

    # --- driving -------------------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> int:
        """Fan out every undispatched event, then send every delivery due at
        `now` (default: the current time), once. Returns deliveries attempted."""
        now = now or utcnow()
        while self.fan_out(now):
            pass

        async def drain() -> int:
            total = 0
            async with self.client() as client:
                while n := await self.deliver_batch(client, now):
                    total += n
            return total

        return asyncio.run(drain())

    def run(self, stop: threading.Event, lanes: int = 4, max_idle: float = MAX_IDLE_SECONDS) -> None:
        """Until `stop` is set: fan-out and `lanes` delivery loops, each
        holding its own claimed batch; idle loops wait for a notification,
        the next scheduled retry or `max_idle` seconds, whichever is first."""
        asyncio.run(self._serve(stop, lanes, max_idle))

    def _seconds_to_next_due(self, max_idle: float) -> float:
        now = utcnow()
        with self.engine.connect() as conn:
            due = DeliveryQueue(conn).next_due(now)
        return max_idle if due is None else min(max_idle, (due - now).total_seconds())

    def _listen(self, stop: threading.Event, loop: asyncio.AbstractEventLoop, wakeups: Wakeups) -> None:
        """A thread: LISTEN on its own connection (taken out of the pool) and
        wake the loops on every notification; reconnects after a failure and
        wakes them then too (what was written meanwhile went unnoticed)."""
        backoff = 0.5
        while not stop.is_set():
            try:
                with listening(self.engine, WAKE_CHANNELS) as conn:
                    loop.call_soon_threadsafe(wakeups.notify)
                    backoff = 0.5
                    while not stop.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            loop.call_soon_threadsafe(wakeups.notify)
            except Exception as exc:  # noqa: BLE001 - PostgreSQL away: retried, the loops' timeout covers the gap
                if connection_lost(exc):
                    # The pool's other connections died with this one (a restart): without dropping them each
                    # try took the next dead one, and notifications stayed off ~12 s after PostgreSQL was back.
                    self.engine.dispose(close=False)
                log.warning("webhook notifications unavailable (%s); retrying in %.1fs", type(exc).__name__, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, LISTEN_RETRY_SECONDS)

    async def _serve(self, stop: threading.Event, lanes: int, max_idle: float) -> None:
        wakeups = Wakeups()

        async def fan_out_loop() -> None:
            while not stop.is_set():
                seen = wakeups.generation
                try:
                    if not await asyncio.to_thread(self.fan_out):
                        await wakeups.wait(seen, max_idle)
                except Exception:  # noqa: BLE001 - retried
                    log.exception("fan-out failed")
                    await asyncio.sleep(1)

        async def lane(client: HTTPClient) -> None:
            while not stop.is_set():
                seen = wakeups.generation
                try:
                    if not await self.deliver_batch(client):
                        await wakeups.wait(seen, await asyncio.to_thread(self._seconds_to_next_due, max_idle))
                except Exception:  # noqa: BLE001 - retried
                    log.exception("delivery batch failed")
                    await asyncio.sleep(1)

        async def report() -> None:
            last = (0, 0)
            while not stop.is_set():
                await asyncio.sleep(10)
                if (self.delivered, self.failed) != last:
                    log.info("webhooks: %d delivered, %d failed attempts so far", self.delivered, self.failed)
                    last = (self.delivered, self.failed)

        async def until_stopped() -> None:
            while not stop.is_set():  # no executor thread parked on `stop`: lanes need them all
                await asyncio.sleep(0.5)
            wakeups.notify()  # idle loops see `stop` at once

        listener = threading.Thread(
            target=self._listen, args=(stop, asyncio.get_running_loop(), wakeups), name="webhook-listen", daemon=True,
        )
        listener.start()
        async with self.client() as client:
            tasks = [asyncio.create_task(fan_out_loop()), asyncio.create_task(report())]
            tasks += [asyncio.create_task(lane(client)) for _ in range(lanes)]
            await until_stopped()
            tasks[1].cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        listener.join(timeout=2)


def main() -> None:
    """`persona-service worker`: deliver webhooks until SIGTERM/SIGINT."""
    import signal

    from persona_service.kernel.api import load, module_process
    from persona_service.webhooks.settings import WebhookSettings

    webhooks = load(WebhookSettings)
    lanes = webhooks.lanes
    # Lanes and fan-out share the pool; the notification listener holds one
    # more of its own: lanes + 2, as its Process declares (the stack's budget).
    with module_process("persona-service-worker", pool_size=lanes + 1) as (settings, engine):
        box = SecretBox(settings.resolved_secrets_key())
        worker = DeliveryWorker(engine, box, allow_private=webhooks.private_allowed,
                                retention_days=webhooks.delivery_retention_days)
        stop = threading.Event()
        # Handlers that take no lock: an Event set from a handler can wait forever for the lock its own thread
        # holds inside Event.wait (as process.server and the runner). The worker runs on a thread; this
        # one polls.
        received: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _: received.append(signum))
        log.info("webhook worker started (lanes=%d, allow_private=%s)", lanes, webhooks.private_allowed)
        delivering = threading.Thread(target=worker.run, args=(stop,), kwargs={"lanes": lanes}, name="webhook-worker")
        delivering.start()
        while not received and delivering.is_alive():
            time.sleep(0.1)
        stop.set()
        delivering.join()
    log.info("webhook worker stopped")
