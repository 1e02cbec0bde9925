"""Webhook endpoints, deliveries and attempts; the worker's fan-out and
claim queries (FOR UPDATE SKIP LOCKED)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Connection,
    Text,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import array

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    OutboxEvent,
    changed_columns,
    declare_aggregate,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.webhooks.records import (
    AttemptRecord,
    DeliveryOutcome,
    DeliveryRecord,
    DueDelivery,
    EndpointChanges,
    EndpointRecord,
    NewDelivery,
    NewEndpoint,
    SecretRotation,
    Subscription,
)
from persona_service.webhooks.tables import WebhookAttempt, WebhookDelivery, WebhookEndpoint

_endpoints = table_of(WebhookEndpoint)
_deliveries = table_of(WebhookDelivery)
_attempts = table_of(WebhookAttempt)
_events = table_of(OutboxEvent)
# An endpoint with its deliveries and their attempts: a write of them (a replay, a ping) locks the endpoint first,
# so a DELETE at the same moment comes before it (404) or after it, never between its read and its insert.
ENDPOINT = declare_aggregate("webhook_endpoint", _endpoints, _deliveries, _attempts)
# A literal, as ix_webhook_deliveries_due's predicate is: a generic plan (psycopg prepares what
# the worker runs often) cannot use the partial index for `status = $1`, and reads every delivery.
_PENDING = _deliveries.c.status == literal_column("'pending'")

TEST_PING = "webhook.endpoint.test_ping"


class WebhookRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    # endpoints

    def create(self, new: NewEndpoint) -> EndpointRecord:
        stmt = insert(_endpoints).values(**row_columns(new)).returning(*_endpoints.c)
        return record(EndpointRecord, self._conn.execute(stmt).mappings().one())

    def get(self, workspace_id: str, endpoint_id: str, *, for_update: bool = False) -> EndpointRecord | None:
        stmt = select(_endpoints).where(_endpoints.c.id == endpoint_id, _endpoints.c.workspace_id == workspace_id)
        if for_update:
            stmt = stmt.with_for_update()
        return record_or_none(EndpointRecord, self._conn.execute(stmt).mappings().first())

    def update(self, workspace_id: str, endpoint_id: str, changes: EndpointChanges, now: datetime) -> EndpointRecord:
        stmt = (
            update(_endpoints)
            .where(_endpoints.c.id == endpoint_id, _endpoints.c.workspace_id == workspace_id)
            .values(updated_at=now, **changed_columns(changes))
            .returning(*_endpoints.c)
        )
        return record(EndpointRecord, self._conn.execute(stmt).mappings().one())

    def delete(self, workspace_id: str, endpoint_id: str) -> bool:
        stmt = delete(_endpoints).where(_endpoints.c.id == endpoint_id, _endpoints.c.workspace_id == workspace_id)
        return self._conn.execute(stmt).rowcount > 0

    def list_page(self, workspace_id: str, limit: int, after: tuple[datetime, str] | None) -> list[EndpointRecord]:
        stmt = select(_endpoints).where(_endpoints.c.workspace_id == workspace_id)
        if after is not None:
            stmt = stmt.where(tuple_(_endpoints.c.created_at, _endpoints.c.id) < tuple_(*after))
        stmt = stmt.order_by(_endpoints.c.created_at.desc(), _endpoints.c.id.desc()).limit(limit)
        return records(EndpointRecord, self._conn.execute(stmt).mappings())

    def all_for_rotation(self) -> list[EndpointRecord]:
        """Every endpoint, locked for the rotation (concurrent rotations serialize)."""
        stmt = select(_endpoints).order_by(_endpoints.c.id).with_for_update()
        return records(EndpointRecord, self._conn.execute(stmt).mappings())

    def rotate(self, endpoint_id: str, rotation: SecretRotation) -> None:
        self._conn.execute(update(_endpoints).where(_endpoints.c.id == endpoint_id).values(**row_columns(rotation)))

    # deliveries

    def deliveries_page(
        self, endpoint_id: str, status: str, limit: int, after: tuple[datetime, str] | None
    ) -> list[DeliveryRecord]:
        stmt = select(_deliveries).where(_deliveries.c.endpoint_id == endpoint_id)
        if status:
            stmt = stmt.where(_deliveries.c.status == status)
        if after is not None:
            stmt = stmt.where(tuple_(_deliveries.c.created_at, _deliveries.c.id) < tuple_(*after))
        stmt = stmt.order_by(_deliveries.c.created_at.desc(), _deliveries.c.id.desc()).limit(limit)
        return records(DeliveryRecord, self._conn.execute(stmt).mappings())

    def attempts_for(self, delivery_ids: list[str]) -> dict[str, list[AttemptRecord]]:
        if not delivery_ids:
            return {}
        stmt = (
            select(_attempts)
            .where(_attempts.c.delivery_id.in_(delivery_ids))
            .order_by(_attempts.c.delivery_id, _attempts.c.attempt)
        )
        result: dict[str, list[AttemptRecord]] = {}
        for attempt in records(AttemptRecord, self._conn.execute(stmt).mappings()):
            result.setdefault(attempt.delivery_id, []).append(attempt)
        return result

    def get_delivery(self, endpoint_id: str, delivery_id: str) -> DeliveryRecord | None:
        stmt = select(_deliveries).where(_deliveries.c.id == delivery_id, _deliveries.c.endpoint_id == endpoint_id)
        return record_or_none(DeliveryRecord, self._conn.execute(stmt).mappings().first())

    def add_delivery(self, new: NewDelivery) -> DeliveryRecord:
        stmt = insert(_deliveries).values(**row_columns(new)).returning(*_deliveries.c)
        return record(DeliveryRecord, self._conn.execute(stmt).mappings().one())

    def event_kept(self, event_id: str) -> bool:
        """Whether the event log still holds the event (it ages out: PERSONA_EVENT_RETENTION_DAYS)."""
        return self._conn.execute(select(_events.c.id).where(_events.c.id == event_id).limit(1)).first() is not None


class DeliveryQueue:
    """The worker's SQL. Every method runs in the caller's transaction."""

    def __init__(self, conn: Connection):
        self._conn = conn

    def lock_undispatched(self, limit: int) -> list[int]:
        """Undispatched events, oldest first, locked; other workers skip them."""
        stmt = (
            select(_events.c.seq)
            .where(_events.c.dispatched_at.is_(None))
            .order_by(_events.c.seq)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return list(self._conn.execute(stmt).scalars())

    def subscribers(self, seqs: list[int]) -> list[Subscription]:
        """(event id, type, endpoint id) for every endpoint each event goes to:
        enabled endpoints of the event's workspace subscribed to its type (or
        `*`); a test ping goes to the endpoint it names, only."""
        e, w = _events, _endpoints
        ping = e.c.type == TEST_PING
        stmt = (
            select(e.c.id.label("event_id"), e.c.type.label("event_type"), w.c.id.label("endpoint_id"),
                   e.c.occurred_at)
            .select_from(e.join(w, (w.c.org_id == e.c.org_id) & (w.c.workspace_id == e.c.workspace_id)))
            .where(e.c.seq.in_(seqs))
            .where(
                or_(
                    ping & (w.c.id == e.c.data["endpointId"].astext),
                    ~ping & w.c.enabled & w.c.events.op("&&")(array([cast(e.c.type, Text), literal("*", Text)])),
                )
            )
        )
        return records(Subscription, self._conn.execute(stmt).mappings())

    # Whole batches as one statement each (arrays unnested server-side): one
    # round trip however many rows. A delivery's created_at is its event's occurred_at, so the unique
    # index on (endpoint_id, event_id, created_at) (the partition key in it: migration 0034) keeps one
    # per (endpoint, event). No conflict target: the same statement holds on the table before 0034 (its
    # index on (endpoint_id, event_id)) and after, so this release may be deployed before that revision.
    _ADD_DELIVERIES = text("""
        INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count,
                                        next_attempt_at, created_at)
        SELECT v.id, v.endpoint_id, v.event_id, v.event_type, 'pending', 0, :now, v.occurred_at
        FROM unnest(CAST(:ids AS text[]), CAST(:endpoint_ids AS text[]), CAST(:event_ids AS text[]),
                    CAST(:event_types AS text[]), CAST(:occurred_ats AS timestamptz[]))
             AS v(id, endpoint_id, event_id, event_type, occurred_at)
        ON CONFLICT DO NOTHING
    """)

    def add_deliveries(self, delivery_ids: list[str], subscriptions: list[Subscription], now: datetime) -> None:
        """A new pending delivery, due at `now`, per subscription (with the id
        at the same index); a repeat of an (endpoint, event) is ignored."""
        if subscriptions:
            self._conn.execute(self._ADD_DELIVERIES, {
                "now": now, "ids": delivery_ids, "endpoint_ids": [s.endpoint_id for s in subscriptions],
                "event_ids": [s.event_id for s in subscriptions], "event_types": [s.event_type for s in subscriptions],
                "occurred_ats": [s.occurred_at for s in subscriptions],
            })

    def mark_dispatched(self, seqs: list[int], now: datetime) -> None:
        self._conn.execute(update(_events).where(_events.c.seq.in_(seqs)).values(dispatched_at=now))

    def claim_due(self, now: datetime, limit: int) -> list[DueDelivery]:
        """Due pending deliveries with what sending needs, row-locked until the
        transaction ends; other workers skip them (no attempt runs twice at
        once), and a worker that dies releases them (nothing is lost)."""
        d, e, w = _deliveries, _events, _endpoints
        stmt = (
            select(
                d.c.id, d.c.endpoint_id, d.c.attempt_count, d.c.event_id,
                e.c.type, e.c.occurred_at, e.c.org_id, e.c.workspace_id, e.c.data,
                w.c.url, w.c.standard_webhooks, w.c.secret_enc, w.c.previous_secret_enc,
                w.c.previous_secret_expires_at,
            )
            .select_from(d.join(e, e.c.id == d.c.event_id).join(w, w.c.id == d.c.endpoint_id))
            .where(_PENDING, d.c.next_attempt_at <= now)
            .where(or_(w.c.enabled, d.c.event_type == TEST_PING))
            .order_by(d.c.next_attempt_at)
            .limit(limit)
            .with_for_update(of=d, skip_locked=True)
        )
        return records(DueDelivery, self._conn.execute(stmt).mappings())

    def next_due(self, now: datetime) -> datetime | None:
        """When the earliest delivery that is not yet due becomes due (what an
        idle worker sleeps until); the same deliveries `claim_due` sends."""
        d, w = _deliveries, _endpoints
        stmt = (
            select(func.min(d.c.next_attempt_at))
            .select_from(d.join(w, w.c.id == d.c.endpoint_id))
            .where(_PENDING, d.c.next_attempt_at > now)
            .where(or_(w.c.enabled, d.c.event_type == TEST_PING))
        )
        due: datetime | None = self._conn.execute(stmt).scalar_one()
        return due

    _ADD_ATTEMPTS = text("""
        INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, status_code, latency_ms, response_body,
                                      error, success)
        SELECT * FROM unnest(CAST(:delivery_ids AS text[]), CAST(:attempts AS integer[]),
                             CAST(:attempted_ats AS timestamptz[]), CAST(:status_codes AS integer[]),
                             CAST(:latencies AS integer[]), CAST(:bodies AS text[]), CAST(:errors AS text[]),
                             CAST(:successes AS boolean[]))
    """)
    _UPDATE_DELIVERIES = text("""
        UPDATE webhook_deliveries AS d
        SET status = v.status, attempt_count = v.attempt_count, next_attempt_at = v.next_attempt_at,
            last_status_code = v.last_status_code, completed_at = v.completed_at
        FROM unnest(CAST(:ids AS text[]), CAST(:statuses AS text[]), CAST(:attempt_counts AS integer[]),
                    CAST(:next_attempt_ats AS timestamptz[]), CAST(:last_status_codes AS integer[]),
                    CAST(:completed_ats AS timestamptz[]))
             AS v(id, status, attempt_count, next_attempt_at, last_status_code, completed_at)
        WHERE d.id = v.id
    """)

    def record(self, attempts: list[AttemptRecord], outcomes: list[DeliveryOutcome]) -> None:
        """Attempt rows, and each delivery's new state: one statement each."""
        if attempts:
            self._conn.execute(self._ADD_ATTEMPTS, {
                "delivery_ids": [a.delivery_id for a in attempts], "attempts": [a.attempt for a in attempts],
                "attempted_ats": [a.attempted_at for a in attempts],
                "status_codes": [a.status_code for a in attempts], "latencies": [a.latency_ms for a in attempts],
                "bodies": [a.response_body for a in attempts], "errors": [a.error for a in attempts],
                "successes": [a.success for a in attempts],
            })
        if outcomes:
            self._conn.execute(self._UPDATE_DELIVERIES, {
                "ids": [o.id for o in outcomes], "statuses": [o.status for o in outcomes],
                "attempt_counts": [o.attempt_count for o in outcomes],
                "next_attempt_ats": [o.next_attempt_at for o in outcomes],
                "last_status_codes": [o.last_status_code for o in outcomes],
                "completed_ats": [o.completed_at for o in outcomes],
            })

    def pending_count(self) -> int:
        stmt = select(func.count()).select_from(_deliveries).where(_PENDING)  # a gauge's sample: decides nothing
        return self._conn.execute(stmt.execution_options(**{DECIDES_NOTHING: True})).scalar_one()
