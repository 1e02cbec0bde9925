"""The declarative base every module's tables use. The schema itself is owned
by Alembic migrations; table declarations must match them and give
repositories typed columns."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, DateTime, Table, func, or_, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


def created_at_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


def seen_from(column: ColumnElement, workspace_id: str | None) -> ColumnElement[bool]:
    """Rows of an organization-wide log (events, audit) a reader confined to
    `workspace_id` sees: its workspace's and those concerning no workspace;
    every row when `workspace_id` is None (an organization-wide reader)."""
    if workspace_id is None:
        return true()
    return or_(column == workspace_id, column.is_(None), column == "")


def table_of(model: type[Base]) -> Table:
    """A model's Core table (repositories build statements on tables; the
    ORM types `__table__` as a plain FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
