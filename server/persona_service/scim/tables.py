"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column, trigram_index

ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"


def _document_index(name: str, *path: str, lower: bool = True) -> Index:
    """An index on the document's text at `path` (lowered for a case-insensitive
    attribute), the expression repository.SqlFilter compares (migration 0017)."""
    value = f"document #>> '{{{','.join(path)}}}'::text[]"
    return Index(name, "org_id", text(f"lower({value})" if lower else f"({value})"))


class ScimUser(Base):
    """A user the organization's IdP provisioned: the SCIM document as sent
    (less `password`), with the attributes filters hit most as columns."""

    __tablename__ = "scim_users"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    # The SCIM id is the user's id (`usr_...`).
    id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    user_name: Mapped[str] = mapped_column(String(320), nullable=False)
    external_id: Mapped[str | None] = mapped_column(String(320))
    display_name: Mapped[str | None] = mapped_column(String(320))
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    document: Mapped[dict[str, object]] = mapped_column(JSONB, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (
        Index("uq_scim_users_user_name", "org_id", text("lower(user_name)"), unique=True,
              info={"conflict_field": "userName"}),
        # `userName sw ...`: a prefix LIKE, whatever the collation (migration 0015).
        Index("ix_scim_users_user_name_prefix", "org_id", text("lower(user_name) text_pattern_ops")),
        Index("ix_scim_users_created", "org_id", "created_at", "id"),
        Index("ix_scim_users_external_id", "org_id", "external_id"),
        # `userName co "x"`, `displayName co "x"`: lowered, as the filter compares them (migration 0027).
        trigram_index("ix_scim_users_user_name_trgm", "lower(user_name)"),
        trigram_index("ix_scim_users_display_name_trgm", "lower(display_name)"),
        # Enterprise-extension filters (`…:enterprise:2.0:User:department eq "x"`).
        _document_index("ix_scim_users_employee_number", ENTERPRISE, "employeeNumber"),
        _document_index("ix_scim_users_cost_center", ENTERPRISE, "costCenter"),
        _document_index("ix_scim_users_organization", ENTERPRISE, "organization"),
        _document_index("ix_scim_users_division", ENTERPRISE, "division"),
        _document_index("ix_scim_users_department", ENTERPRISE, "department"),
        _document_index("ix_scim_users_manager", ENTERPRISE, "manager", "value", lower=False),  # caseExact
    )


class ScimUserCount(Base):
    """How many SCIM users an organization has (`totalResults` without a
    filter), kept by the trigger `scim_users_count` (migration 0018) in the
    transaction of every insert and delete of scim_users."""

    __tablename__ = "scim_user_counts"
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    total: Mapped[int] = mapped_column(Integer, nullable=False)


class ScimGroup(Base):
    __tablename__ = "scim_groups"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    display_name: Mapped[str] = mapped_column(String(320), nullable=False)
    external_id: Mapped[str | None] = mapped_column(String(320))
    # What the group grants (see scim.proto): a role, and a workspace (NULL: every workspace).
    role: Mapped[str | None] = mapped_column(String(20))
    workspace_id: Mapped[str | None] = mapped_column(String(40))
    document: Mapped[dict[str, object]] = mapped_column(JSONB, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())

    __table_args__ = (
        Index("uq_scim_groups_display_name", "org_id", text("lower(display_name)"), unique=True,
              info={"conflict_field": "displayName"}),
        Index("ix_scim_groups_created", "org_id", "created_at", "id"),
        trigram_index("ix_scim_groups_display_name_trgm", "lower(display_name)"),  # `displayName co "x"`
    )


class ScimGroupMember(Base):
    """Who is in a group (the group's `members` as sent stay in its document)."""

    __tablename__ = "scim_group_members"
    group_id: Mapped[str] = mapped_column(ForeignKey("scim_groups.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)

    __table_args__ = (Index("ix_scim_group_members_user", "org_id", "user_id"),)
