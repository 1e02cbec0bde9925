"""The declarative base every module's tables use. The schema itself is owned
by Alembic migrations; table declarations must match them and give
repositories typed columns."""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

from sqlalchemy import Column, ColumnElement, DateTime, Index, Table, func, or_, text, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.base import ReadOnlyColumnCollection

# A table taken by code that reads no column's type (locks it, inserts into it, reads its constraints): a bare
# `Table` is SQLAlchemy 2.1's default, a collection of Column[Any], an Any mypy counts as written where it is named.
SomeTable: TypeAlias = "Table[ReadOnlyColumnCollection[str, Column[object]]]"


class Base(DeclarativeBase):
    pass


def trigram_index(name: str, expression: str) -> Index:
    """A GIN trigram index on a text expression: it serves `LIKE`/`ILIKE
    '%x%'` on that expression when the needle has a trigram (3 characters or
    more); shorter needles read the rows as before. Needs pg_trgm (migration 0026).
    `fastupdate` off: a write updates the index at once rather than queueing in
    GIN's pending list, whose whole length the planner charges every search
    until a vacuum flushes it (searches fell back to reading every row)."""
    return Index(name, text(f"{expression} gin_trgm_ops"), postgresql_using="gin",
                 postgresql_with={"fastupdate": "off"})


def created_at_column() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


def seen_from(column: ColumnElement[str | None], workspace_id: str | None) -> ColumnElement[bool]:
    """Rows of an organization-wide log (events, audit) a reader confined to
    `workspace_id` sees: its workspace's and those concerning no workspace;
    every row when `workspace_id` is None (an organization-wide reader)."""
    if workspace_id is None:
        return true()
    return or_(column == workspace_id, column.is_(None), column == "")


# The bare Table repositories build on, its columns' types as the model declares them: SQLAlchemy's default type
# argument (Column[Any]) is the Any mypy counts here.
def table_of(model: type[Base]) -> Table:  # type: ignore[explicit-any]
    """A model's Core table (repositories build statements on tables; the
    ORM types `__table__` as a plain FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table
