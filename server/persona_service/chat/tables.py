"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class ChatSession(Base):
    __tablename__ = "chat_sessions"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False, index=True)
    persona_id: Mapped[str] = mapped_column(String(40), nullable=False)
    user_id: Mapped[str] = mapped_column(String(200), nullable=False)
    title: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="active")
    message_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    cost_usd_micros: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    last_active_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The persona version the session is pinned to; NULL: the current one (migration 0022).
    persona_version: Mapped[int | None] = mapped_column(Integer)
    # Messages removed (edits, deletes): a new message's ordinal is message_count + removed_messages.
    removed_messages: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    # Replies billed while their model had no price: their cost is unknown, not in cost_usd_micros (0031).
    unpriced_replies: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")

    __table_args__ = (
        Index("ix_chat_sessions_workspace_started", "workspace_id", "started_at", "id"),
        # One per list filter, in the keyset order (migration 0015).
        Index("ix_chat_sessions_workspace_user_started", "workspace_id", "user_id", "started_at", "id"),
        Index("ix_chat_sessions_workspace_persona_started", "workspace_id", "persona_id", "started_at", "id"),
        Index("ix_chat_sessions_workspace_status_started", "workspace_id", "status", "started_at", "id"),
        # A user's sessions in the organization: the DSAR export and the erasure (migration 0016).
        Index("ix_chat_sessions_org_user_started", "org_id", "user_id", "started_at", "id"),
        # What a message's foreign key names: (id, started_at) is its partition's (migration 0035).
        Index("uq_chat_sessions_id_started", "id", "started_at", unique=True),
    )


class ChatMessage(Base):
    """One message of a chat session; `ordinal` is claimed with the session's
    atomic counter update, so concurrent exchanges never share one. Range-partitioned by month on
    `session_started_at`, its session's start (migration 0035): a session's messages live in one
    partition, and retention (PERSONA_CHAT_RETENTION_DAYS) drops whole months of sessions."""

    __tablename__ = "chat_messages"
    # What matches an INSERT's returned rows to its messages (the key's other column has a server default).
    id: Mapped[str] = mapped_column(String(40), primary_key=True, insert_sentinel=True)
    session_id: Mapped[str] = mapped_column(String(40), nullable=False)
    # The partition key, so part of the keys: the session's `started_at` (the foreign key below holds it to
    # it). '-infinity': not given (the release before 0035), set by the trigger of the legacy partition.
    session_started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True,
                                                         server_default=text("'-infinity'"))
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    workspace_id: Mapped[str] = mapped_column(String(40), nullable=False)
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    role: Mapped[str] = mapped_column(String(12), nullable=False)  # user | assistant
    content: Mapped[str] = mapped_column(Text, nullable=False)
    model: Mapped[str] = mapped_column(String(100), nullable=False, default="")
    input_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    cost_usd_micros: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    drift_score: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    recovered: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # The reply's model had no price when it was billed: cost_usd_micros is 0 but unknown (migration 0031).
    unpriced: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    created_at: Mapped[datetime] = created_at_column()
    # A turn's alternatives (regenerated replies) share its ordinal; `selected` is the one it continues from.
    swipe: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    selected: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    edited: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    # Removed (an edit's truncation, a delete): its text erased, its usage kept for usage over time.
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The API key the reply was billed to ("session" for a dashboard session, "" before migration 0023).
    credential_id: Mapped[str] = mapped_column(String(80), nullable=False, server_default="")

    __table_args__ = (
        # One per (session, ordinal, swipe): the session's start is a function of the session.
        Index("uq_chat_messages_session_ordinal_swipe", "session_id", "ordinal", "swipe", "session_started_at",
              unique=True),
        Index("ix_chat_messages_workspace_replies", "workspace_id", "created_at",
              postgresql_where=text("role = 'assistant'")),
        ForeignKeyConstraint(["session_id", "session_started_at"], ["chat_sessions.id", "chat_sessions.started_at"],
                             ondelete="CASCADE", name="chat_messages_session_fkey"),
        {"postgresql_partition_by": "RANGE (session_started_at)"},
    )
