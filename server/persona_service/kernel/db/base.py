"""The declarative base every module's tables use. The schema itself is owned
by Alembic migrations; table declarations must match them and give
repositories typed columns."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Table, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


def created_at_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


def table_of(model: type[Base]) -> Table:
    """A model's Core table (repositories build statements on tables; the
    ORM types `__table__` as a plain FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
