"""Typed records: what repositories hand to services and servicers, instead
of rows read by string key. A record is a frozen dataclass whose field names
are column names (or labels of the query); a row may carry more columns than
the record names, never fewer (a missing one is a KeyError at the repository,
where the query is).

The other way, a service hands a repository a `New<Thing>` (a row to insert)
or a `<Thing>Changes` (the columns an update sets, None for those it leaves
alone) rather than column names; the repository turns it into the statement's
values (`row_columns`, `changed_columns`), so column names stay there."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol, TypeVar

R = TypeVar("R")


class Row(Protocol):
    """A row read by column name: SQLAlchemy's `RowMapping` (whose keys may be columns too, so no `Mapping[str,
    ...]`: a mapping's key type is invariant), a dict. Its values are `object`: the record's fields type them."""

    def __getitem__(self, name: str, /) -> object: ...


_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The record's fields, in constructor order."""
    names = _NAMES.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} is not a dataclass")
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names


def record(cls: type[R], row: Row) -> R:
    """One row (a `RowMapping`, or any mapping) as a `cls` record."""
    return cls(**{name: row[name] for name in field_names(cls)})


def record_or_none(cls: type[R], row: Row | None) -> R | None:
    return None if row is None else record(cls, row)


def records(cls: type[R], rows: Iterable[Row]) -> list[R]:
    names = field_names(cls)
    return [cls(**{name: row[name] for name in names}) for row in rows]


def row_columns(new: object) -> dict[str, object]:
    """A `New<Thing>` record as its row's values: every field, by column name."""
    return {name: getattr(new, name) for name in field_names(type(new))}


def changed_columns(changes: object) -> dict[str, object]:
    """A `<Thing>Changes` record as an update's values: the fields it sets (None: the column is left as it is;
    a column set to NULL is a repository method of its own, named for why)."""
    return {name: value for name in field_names(type(changes)) if (value := getattr(changes, name)) is not None}
