"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class PrivacyExport(Base):
    __tablename__ = "privacy_exports"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    user_id: Mapped[str] = mapped_column(String(40), nullable=False)
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="pending")
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    storage_key: Mapped[str] = mapped_column(Text, nullable=False, default="")
    sha256: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    error: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = created_at_column()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_privacy_exports_user_created", "org_id", "user_id", "created_at", "id"),
        Index("ix_privacy_exports_open", "created_at", postgresql_where=text("status IN ('pending', 'running')")),
        # One pending or running export per user at a time.
        Index("uq_privacy_exports_open_user", "org_id", "user_id", unique=True,
              postgresql_where=text("status IN ('pending', 'running')")),
    )
