"""Tables. The schema itself is owned by Alembic migrations (migrations/);
these declarations must match them and give repositories typed columns."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


def _created_at() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class Organization(Base):
    __tablename__ = "organizations"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), nullable=False, unique=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    region: Mapped[str] = mapped_column(String(8), nullable=False)
    data_residency_locked: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    plan: Mapped[str] = mapped_column(String(20), nullable=False)
    owner_user_id: Mapped[str] = mapped_column(String(40), nullable=False)
    created_at: Mapped[datetime] = _created_at()


class Workspace(Base):
    __tablename__ = "workspaces"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False, index=True)
    slug: Mapped[str] = mapped_column(String(100), nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = _created_at()


class User(Base):
    __tablename__ = "users"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), nullable=False, unique=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    is_platform_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = _created_at()


class Membership(Base):
    __tablename__ = "memberships"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True)
    role: Mapped[str] = mapped_column(String(20), nullable=False)  # owner | admin | member
    created_at: Mapped[datetime] = _created_at()


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False)
    created_by_user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), nullable=False)
    name: Mapped[str] = mapped_column(String(100), nullable=False)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    mode: Mapped[str] = mapped_column(String(8), nullable=False)
    prefix: Mapped[str] = mapped_column(String(20), nullable=False)
    # SHA-256 of the whole secret; the secret itself is never stored.
    secret_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    ip_allowlist: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, default=list)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (Index("ix_api_keys_workspace_created", "workspace_id", "created_at", "id"),)


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

    __table_args__ = (Index("ix_chat_sessions_workspace_started", "workspace_id", "started_at", "id"),)


class ChatMessage(Base):
    """One message of a chat session; `ordinal` is claimed with the session's
    atomic counter update, so concurrent exchanges never share one."""

    __tablename__ = "chat_messages"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("chat_sessions.id", ondelete="CASCADE"), nullable=False)
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
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (UniqueConstraint("session_id", "ordinal", name="uq_chat_messages_session_ordinal"),)


class ConfigItem(Base):
    """A setting at one level: workspace_id '' means the organization level,
    'persona:<uuid>' the persona level (drift-detection keys only)."""

    __tablename__ = "config_items"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    workspace_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[object] = mapped_column(JSONB, nullable=False)
    updated_by: Mapped[str] = mapped_column(String(64), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class IdempotencyRecord(Base):
    """One Idempotency-Key of one credential: claimed while the first request
    runs, then holding its outcome for replays until `expires_at`."""

    __tablename__ = "idempotency_keys"
    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
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
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, index=True)


class AuditEvent(Base):
    __tablename__ = "audit_events"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
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

    __table_args__ = (Index("ix_audit_events_org_time", "org_id", "occurred_at", "id"),)


class Persona(Base):
    __tablename__ = "personas"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)  # uuid
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False)
    slug: Mapped[str] = mapped_column(String(64), nullable=False)
    display_name: Mapped[str] = mapped_column(String(200), nullable=False)
    visibility: Mapped[str] = mapped_column(String(12), nullable=False)
    # `metadata` is reserved on ORM classes; the column (and Core key) is "metadata".
    meta: Mapped[object] = mapped_column("metadata", JSONB, nullable=False, default=dict)
    intent: Mapped[str] = mapped_column(Text, nullable=False)
    soul: Mapped[object] = mapped_column(JSONB, nullable=False)
    state: Mapped[str] = mapped_column(String(12), nullable=False)  # active | flagged | archived | deleted
    state_before_delete: Mapped[str | None] = mapped_column(String(12))
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    parent_id: Mapped[str | None] = mapped_column(String(36), index=True)
    root_id: Mapped[str] = mapped_column(String(36), nullable=False, index=True)
    fork_ordinal: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # Forks made of this persona so far: incremented atomically, so parallel
    # forks each get their own ordinal (and default slug).
    fork_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    fork_note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    audit_score: Mapped[float | None] = mapped_column(Float)
    flagged_reason: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    last_run_id: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    # The Character Card V2 `data` a persona was imported from, kept verbatim
    # so exporting it again gives the same card.
    card_extra: Mapped[object | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    purge_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("workspace_id", "slug", name="uq_personas_workspace_slug"),
        Index("ix_personas_workspace_created", "workspace_id", "created_at", "id"),
    )


class PersonaVersion(Base):
    __tablename__ = "persona_versions"
    persona_id: Mapped[str] = mapped_column(ForeignKey("personas.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(12), nullable=False)  # create | refine | regenerate | fork | import
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    instruction: Mapped[str] = mapped_column(Text, nullable=False, default="")
    soul: Mapped[object] = mapped_column(JSONB, nullable=False)
    voice: Mapped[object] = mapped_column(JSONB, nullable=False)
    run_id: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    created_at: Mapped[datetime] = _created_at()


class VoiceProfile(Base):
    """The current voice of a persona (history lives in persona_versions)."""

    __tablename__ = "voice_profiles"
    persona_id: Mapped[str] = mapped_column(ForeignKey("personas.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    system_prompt: Mapped[str] = mapped_column(Text, nullable=False)
    greeting: Mapped[str] = mapped_column(Text, nullable=False, default="")
    sample_dialogues: Mapped[object] = mapped_column(JSONB, nullable=False, default=list)
    style_notes: Mapped[str] = mapped_column(Text, nullable=False, default="")
    fingerprint: Mapped[list[float]] = mapped_column(ARRAY(Float), nullable=False)
    fingerprint_model: Mapped[str] = mapped_column(String(100), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class GenerationRun(Base):
    __tablename__ = "generation_runs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    workspace_id: Mapped[str] = mapped_column(String(40), nullable=False)
    persona_id: Mapped[str] = mapped_column(String(36), nullable=False, index=True)
    kind: Mapped[str] = mapped_column(String(12), nullable=False)
    status: Mapped[str] = mapped_column(String(12), nullable=False)  # running | completed | failed
    from_step: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error_code: Mapped[str] = mapped_column(String(40), nullable=False, default="")


class GenerationStep(Base):
    __tablename__ = "generation_steps"
    run_id: Mapped[str] = mapped_column(ForeignKey("generation_runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[str] = mapped_column(String(32), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(String(12), nullable=False)  # completed | failed | reused
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    duration_ms: Mapped[int] = mapped_column(Integer, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    output: Mapped[object] = mapped_column(JSONB, nullable=False, default=dict)
    error: Mapped[object | None] = mapped_column(JSONB)


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
    status: Mapped[str] = mapped_column(String(12), nullable=False, default="pending")
    created_at: Mapped[datetime] = _created_at()

    __table_args__ = (Index("ix_moderation_reviews_status_created", "status", "created_at"),)


class OutboxEvent(Base):
    """The transactional outbox: written with the change it reports."""

    __tablename__ = "events"
    seq: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    id: Mapped[str] = mapped_column(String(40), nullable=False, unique=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    workspace_id: Mapped[str] = mapped_column(String(40), nullable=False)
    type: Mapped[str] = mapped_column(String(64), nullable=False)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    data: Mapped[object] = mapped_column(JSONB, nullable=False)
    # Set by the webhook worker in the transaction that fans the event out
    # into webhook_deliveries; NULL: not yet fanned out.
    dispatched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_events_org_seq", "org_id", "seq"),
        Index("ix_events_undispatched", "seq", postgresql_where=text("dispatched_at IS NULL")),
    )


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
    secret_enc: Mapped[str] = mapped_column(Text, nullable=False)
    secret_created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    # The secret a rotation replaced, valid (also signed with) until expiry.
    previous_secret_enc: Mapped[str | None] = mapped_column(Text)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (Index("ix_webhook_endpoints_workspace_created", "workspace_id", "created_at", "id"),)


class WebhookDelivery(Base):
    """One event to one endpoint. `pending` rows are claimed by workers with
    FOR UPDATE SKIP LOCKED when `next_attempt_at` is due."""

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
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_webhook_deliveries_due", "next_attempt_at", postgresql_where=text("status = 'pending'")),
        Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at", "id"),
        # Fan-out is idempotent: one original delivery per (endpoint, event).
        Index(
            "uq_webhook_deliveries_endpoint_event", "endpoint_id", "event_id", unique=True,
            postgresql_where=text("replay_of IS NULL"),
        ),
    )


class WebhookAttempt(Base):
    """One HTTP attempt of a delivery."""

    __tablename__ = "webhook_attempts"
    delivery_id: Mapped[str] = mapped_column(ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    latency_ms: Mapped[int] = mapped_column(Integer, nullable=False)
    response_body: Mapped[str] = mapped_column(Text, nullable=False, default="")
    error: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    success: Mapped[bool] = mapped_column(Boolean, nullable=False)
