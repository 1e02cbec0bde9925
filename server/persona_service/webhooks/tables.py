"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ARRAY,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class WebhookEndpoint(Base):
    """A workspace's webhook endpoint. Secrets are Fernet tokens (encrypted
    at rest with the server's secrets key), never plain text."""

    __tablename__ = "webhook_endpoints"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    # Event types, or ["*"] for all.
    events: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    enabled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    # Also send the Standard Webhooks headers (webhook-id, -timestamp, -signature).
    standard_webhooks: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    secret_enc: Mapped[str] = mapped_column(Text, nullable=False)
    secret_created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # The secret a rotation replaced, valid (also signed with) until expiry.
    previous_secret_enc: Mapped[str | None] = mapped_column(Text)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (Index("ix_webhook_endpoints_workspace_created", "workspace_id", "created_at", "id"),)


class WebhookDelivery(Base):
    """One event to one endpoint. `pending` rows are claimed by workers with
    FOR UPDATE SKIP LOCKED when `next_attempt_at` is due. Range-partitioned by month
    on `created_at` (migration 0034), aged out by dropping partitions
    (PERSONA_WEBHOOK_DELIVERY_RETENTION_DAYS)."""

    __tablename__ = "webhook_deliveries"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), nullable=False)
    event_id: Mapped[str] = mapped_column(String(40), nullable=False)
    event_type: Mapped[str] = mapped_column(String(64), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)  # pending | succeeded | dead_lettered
    attempt_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    replay_of: Mapped[str | None] = mapped_column(String(40))
    # The partition key, so part of the keys. A fanned-out delivery's is its event's `occurred_at` (a
    # replay's: when it was asked), which keeps the unique index below one per (endpoint, event).
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_webhook_deliveries_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
        Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at", "id"),
        # Fan-out is idempotent: one original delivery per (endpoint, event), `created_at` being the event's.
        Index(
            "uq_webhook_deliveries_endpoint_event", "endpoint_id", "event_id", "created_at", unique=True,
            postgresql_where=text("replay_of IS NULL"),
        ),
        {"postgresql_partition_by": "RANGE (created_at)"},
    )


class WebhookAttempt(Base):
    """One HTTP attempt of a delivery. Range-partitioned by month on `attempted_at` (migration 0034), aged
    out as the deliveries are. No foreign key to its delivery (one referencing a partitioned table holds
    its partition key, and blocks dropping its partitions): migration 0034's row trigger
    `webhook_deliveries_cascade` deletes a delivery's attempts with it, as ON DELETE CASCADE did."""

    __tablename__ = "webhook_attempts"
    delivery_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The partition key, so part of the primary key.
    attempted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    latency_ms: Mapped[int] = mapped_column(Integer, nullable=False)
    response_body: Mapped[str] = mapped_column(Text, nullable=False, default="")
    error: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    success: Mapped[bool] = mapped_column(Boolean, nullable=False)

    __table_args__ = ({"postgresql_partition_by": "RANGE (attempted_at)"},)
