"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    DateTime,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    literal_column,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.data.base import Base, created_at_column


class IdempotencyRecord(Base):
    """One Idempotency-Key of one organization (any of its credentials):
    claimed while the first request runs, then holding its outcome for
    replays until `expires_at`."""

    __tablename__ = "idempotency_keys"
    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # Who first used the key. (In the primary key from before keys were the organization's; the
    # unique index on (org_id, key), migration 0020, is the key's identity.)
    credential_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    method: Mapped[str] = mapped_column(String(200), nullable=False)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    state: Mapped[str] = mapped_column(String(12), nullable=False)  # running | completed
    # A claim whose request died with its process is taken over after this.
    locked_until: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # Outcome: the serialized response message, or the error (status + envelope).
    response: Mapped[bytes | None] = mapped_column(LargeBinary)
    error_status: Mapped[int | None] = mapped_column(Integer)
    error_body: Mapped[str | None] = mapped_column(Text)
    headers: Mapped[object | None] = mapped_column(JSONB)
    # A stream's outcome is its run (headers' x-run-id); once it ended, its frames, sealed and compressed
    # (kernel.transport.idempotency `keep_frames`): replays outlive Redis's copy (migration 0037).
    frames: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)

    __table_args__ = (Index("uq_idempotency_keys_org_key", "org_id", "key", unique=True),)


class AuditEvent(Base):
    __tablename__ = "audit_events"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # The partition key, so part of the primary key (PostgreSQL's unique indexes on a partitioned table
    # hold the key): monthly range partitions (migration 0032), aged out by dropping them.
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True,
                                                  server_default=func.now())
    # NULL for failures that name no organization (e.g. an unknown key).
    org_id: Mapped[str | None] = mapped_column(String(40))
    workspace_id: Mapped[str | None] = mapped_column(String(40))
    actor_user_id: Mapped[str | None] = mapped_column(String(64))
    credential_id: Mapped[str | None] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(100), nullable=False)
    resource_type: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    resource_id: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    outcome: Mapped[str] = mapped_column(String(10), nullable=False)
    status: Mapped[int] = mapped_column(Integer, nullable=False)
    error_code: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    request_id: Mapped[str] = mapped_column(String(200), nullable=False)
    client_ip: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    details: Mapped[object] = mapped_column(JSONB, nullable=False, default=dict)

    __table_args__ = (
        Index("ix_audit_events_org_time", "org_id", "occurred_at", "id"),
        # One per list filter, in the keyset order (migration 0015).
        Index("ix_audit_events_org_action_time", "org_id", "action", "occurred_at", "id"),
        Index("ix_audit_events_org_actor_time", "org_id", "actor_user_id", "occurred_at", "id"),
        Index("ix_audit_events_org_credential_time", "org_id", "credential_id", "occurred_at", "id"),
        Index("ix_audit_events_org_resource_time", "org_id", "resource_type", "resource_id", "occurred_at", "id"),
        Index("ix_audit_events_org_failures", "org_id", "occurred_at", "id", postgresql_where=text("outcome = 'failure'")),
        {"postgresql_partition_by": "RANGE (occurred_at)"},
    )


# The persona an event concerns, as the list filter and its index spell it
# (a literal key: an expression index matches only the same expression).
EVENT_PERSONA: ColumnElement[str] = literal_column("(data ->> 'personaId')")


class OutboxEvent(Base):
    """The transactional outbox: written with the change it reports."""

    __tablename__ = "events"
    seq: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    id: Mapped[str] = mapped_column(String(40), nullable=False)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    workspace_id: Mapped[str] = mapped_column(String(40), nullable=False)
    type: Mapped[str] = mapped_column(String(64), nullable=False)
    # The partition key, so part of the keys (monthly range partitions, migration 0033, aged out by dropping them).
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    data: Mapped[object] = mapped_column(JSONB, nullable=False)
    # Set by the webhook worker in the transaction that fans the event out
    # into webhook_deliveries; NULL: not yet fanned out.
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_events_org_seq", "org_id", "seq"),
        # The list's keyset order, per filter (migration 0015).
        Index("ix_events_org_time", "org_id", "occurred_at", "id"),
        Index("ix_events_org_type_time", "org_id", "type", "occurred_at", "id"),
        Index("ix_events_org_persona_time", "org_id", EVENT_PERSONA, "occurred_at", "id"),
        Index("ix_events_undispatched", "seq", postgresql_where=text("dispatched_at IS NULL")),
        UniqueConstraint("id", "occurred_at", name="events_id_key"),
        {"postgresql_partition_by": "RANGE (occurred_at)"},
    )


class Task(Base):
    """Durable background work (kernel.transport.tasks): enqueued with the change that
    needs it, claimed by any server process, retried, never lost."""

    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), nullable=False)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    subject_id: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    payload: Mapped[object] = mapped_column(JSONB, nullable=False, default=dict)
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="queued")  # queued | running | done | failed
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    run_after: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = created_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_tasks_due", "run_after", postgresql_where=text("status IN ('queued', 'running')")),
        Index("ix_tasks_org_running", "org_id", postgresql_where=text("status = 'running'")),
        Index("ix_tasks_finished", "finished_at", postgresql_where=text("finished_at IS NOT NULL")),
    )


class QuotaWindow(Base):
    """The window an organization's monthly quotas count in now (its billing period, else the
    calendar month), and since when they count: the start of the earliest window it replaced
    before that one reset (a subscription opened mid-month keeps counting the month's use)."""

    __tablename__ = "quota_windows"
    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    starts_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    ends_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    counts_since: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class QuotaDraw(Base):
    """One unit of a Redis-counted quota that a committed call used (e.g. a generation): what
    rebuilds the counter when Redis loses it."""

    __tablename__ = "quota_draws"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    quota: Mapped[str] = mapped_column(String(40), nullable=False)
    drawn_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (Index("ix_quota_draws_org_quota_drawn_at", "org_id", "quota", "drawn_at"),)
