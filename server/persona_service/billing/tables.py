"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class Subscription(Base):
    __tablename__ = "subscriptions"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    plan: Mapped[str] = mapped_column(String(20), nullable=False)
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="active")  # active | past_due
    current_period_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    current_period_end: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    cancel_at_period_end: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    credit_minor: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    invoice_seq: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # Lines the next renewal invoice carries (marketplace payouts, as credits).
    pending_lines: Mapped[object] = mapped_column(JSONB, nullable=False, default=list)
    processor_customer_id: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (
        Index("ix_subscriptions_period_end", "current_period_end"),
    )


class Invoice(Base):
    __tablename__ = "invoices"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    processor_invoice_id: Mapped[str] = mapped_column(String(64), nullable=False)
    number: Mapped[str] = mapped_column(String(40), nullable=False)
    kind: Mapped[str] = mapped_column(String(12), nullable=False)  # renewal | proration | purchase
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    currency: Mapped[str] = mapped_column(String(3), nullable=False)
    amount_due_minor: Mapped[int] = mapped_column(BigInteger, nullable=False)
    amount_paid_minor: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    period_start: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    period_end: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    due_date: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    paid_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    line_items: Mapped[object] = mapped_column(JSONB, nullable=False)
    # Bumped by every change that alters the rendered PDF (status, amounts).
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    pdf_key: Mapped[str] = mapped_column(String(300), nullable=False, default="")
    # `created` of the last processor event applied (events apply in order; older ones are ignored).
    processor_event_at: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    created_at: Mapped[datetime] = created_at_column()

    __table_args__ = (
        Index("ix_invoices_org_created", "org_id", "created_at", "id"),
        Index("ix_invoices_processor_id", "processor_invoice_id"),
        UniqueConstraint("org_id", "number", name="uq_invoices_org_number"),
        # A period renews once, whatever the number of processes renewing.
        Index("uq_invoices_renewal", "org_id", "period_start", unique=True, postgresql_where=text("kind = 'renewal'")),
    )


class ProcessorEvent(Base):
    """Processor webhook events applied (each once)."""

    __tablename__ = "billing_processor_events"
    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    type: Mapped[str] = mapped_column(String(80), nullable=False)
    received_at: Mapped[datetime] = created_at_column()
