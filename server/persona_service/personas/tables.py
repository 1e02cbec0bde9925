"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import (
    ARRAY,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column


class FloatArray(TypeDecorator[list[float]]):
    """A float8[] (a fingerprint) sent as one array literal: the driver dumps a list element by element in
    Python, several times the cost of one join (issue 50: a persona creation writes its fingerprint twice)."""

    impl = ARRAY(Float)
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[list[float] | None], str | None]:
        def process(value: list[float] | None) -> str | None:
            return None if value is None else "{" + ",".join(map(repr, value)) + "}"
        return process


SLUG_CONSTRAINT = "uq_personas_workspace_slug"  # a workspace's slugs are unique


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
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    purge_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("workspace_id", "slug", name=SLUG_CONSTRAINT),
        Index("ix_personas_workspace_created", "workspace_id", "created_at", "id"),
        # One per list filter, in the keyset order (migration 0015).
        Index("ix_personas_workspace_state_created", "workspace_id", "state", "created_at", "id"),
        Index("ix_personas_workspace_visibility_created", "workspace_id", "visibility", "created_at", "id"),
        Index("ix_personas_root_created", "root_id", "created_at"),
        # The list's other orders and its search (migration 0021).
        Index("ix_personas_workspace_updated", "workspace_id", "updated_at", "id"),
        Index("ix_personas_workspace_name", "workspace_id", text("lower(display_name)"), "id"),
        # (As Alembic reflects PostgreSQL's expression: its drift check compares the text.)
        # No longer used by the search: the previous release's walks it while the servers are replaced; a
        # contract step of a later release drops it (migration 0030).
        Index("ix_personas_search", text("to_tsvector('simple'::regconfig, (((display_name::text || ' '::text) "
                                         "|| slug::text) || ' '::text) || intent)"), postgresql_using="gin"),
        # The search's: words split at punctuation and symbols too (migration 0030; the
        # expression is personas.repository.SEARCH_DOCUMENT's).
        Index("ix_personas_search_words",
              text("to_tsvector('simple'::regconfig, regexp_replace((((((display_name)::text || ' '::text) "
                   "|| (slug)::text) || ' '::text) || intent), '[[:punct:]]+'::text, ' '::text, 'g'::text))"),
              postgresql_using="gin", postgresql_with={"fastupdate": "off"}),
    )


class PersonaVersion(Base):
    __tablename__ = "persona_versions"
    persona_id: Mapped[str] = mapped_column(ForeignKey("personas.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(12), nullable=False)  # create | refine | regenerate | fork | import | rollback
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    instruction: Mapped[str] = mapped_column(Text, nullable=False, default="")
    soul: Mapped[object] = mapped_column(JSONB, nullable=False)
    voice: Mapped[object] = mapped_column(JSONB, nullable=False)
    run_id: Mapped[str] = mapped_column(String(40), nullable=False, default="")
    created_at: Mapped[datetime] = created_at_column()
    # The version's own fingerprint; NULL for versions made before migration 0021 but the then-current one.
    fingerprint: Mapped[list[float] | None] = mapped_column(FloatArray())
    fingerprint_model: Mapped[str | None] = mapped_column(String(100))
    # For a rollback, the version it copies.
    source_version: Mapped[int | None] = mapped_column(Integer)


class VoiceProfile(Base):
    """The current voice of a persona (history lives in persona_versions)."""

    __tablename__ = "voice_profiles"
    persona_id: Mapped[str] = mapped_column(ForeignKey("personas.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    system_prompt: Mapped[str] = mapped_column(Text, nullable=False)
    greeting: Mapped[str] = mapped_column(Text, nullable=False, default="")
    sample_dialogues: Mapped[object] = mapped_column(JSONB, nullable=False, default=list)
    style_notes: Mapped[str] = mapped_column(Text, nullable=False, default="")
    fingerprint: Mapped[list[float]] = mapped_column(FloatArray(), nullable=False)
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
