"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ARRAY,
    DateTime,
    Index,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column

# Items still open (the queue), literal so the partial indexes' predicate
# is provably implied in every plan, generic ones included.
OPEN = text("status IN ('pending', 'claimed')")


class ModerationReview(Base):
    __tablename__ = "moderation_reviews"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    workspace_id: Mapped[str] = mapped_column(String(40), nullable=False)
    stage: Mapped[str] = mapped_column(String(32), nullable=False)  # input_intent | output_content | impersonation | pii
    subject_type: Mapped[str] = mapped_column(String(32), nullable=False)
    subject_id: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    categories: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    scores: Mapped[object] = mapped_column(JSONB, nullable=False, default=dict)
    excerpt: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="pending")  # pending | claimed | resolved
    claimed_by: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    claim_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    decision: Mapped[str] = mapped_column(String(12), nullable=False, default="")
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    resolved_by: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_at_column()

    __table_args__ = (
        Index("ix_moderation_reviews_status_created", "status", "created_at"),
        # The queue, oldest first (migration 0015).
        Index("ix_moderation_reviews_open", "created_at", "id", postgresql_where=OPEN),
        Index("ix_moderation_reviews_open_stage", "stage", "created_at", "id", postgresql_where=OPEN),
    )
