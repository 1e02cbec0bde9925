"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Index, Integer, String, Text, func, text
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class Portrait(Base):
    __tablename__ = "portraits"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # a uuid
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False)
    persona_id: Mapped[str] = mapped_column(String(40), nullable=False)
    conversation_id: Mapped[str] = mapped_column(String(40), nullable=False)
    parent_portrait_id: Mapped[str | None] = mapped_column(String(40))
    instruction: Mapped[str] = mapped_column(Text, nullable=False, default="")
    prompt: Mapped[str] = mapped_column(Text, nullable=False, default="")
    style: Mapped[str] = mapped_column(String(32), nullable=False, default="flat")
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="pending")
    canonical: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    storage_key: Mapped[str] = mapped_column(Text, nullable=False)
    size: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    width: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    height: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    failure_code: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (
        Index("ix_portraits_persona_created", "persona_id", "created_at", "id"),
        Index("ix_portraits_conversation", "conversation_id"),
        Index("ix_portraits_org_created", "org_id", "created_at"),
        Index("uq_portraits_canonical", "persona_id", unique=True, postgresql_where=text("canonical")),
    )
