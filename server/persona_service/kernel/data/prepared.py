"""Hot reads as prepared statements on the unit of work's own connection.

Through SQLAlchemy every execution pays for a compiled-cache lookup, an
execution context, a cursor and result wrappers: about 40% of a GET's
Python time went to those layers for one primary-key SELECT. A `Prepared`
read is compiled once to psycopg's SQL and run on the driver connection the
unit of work already holds (same pool, same transaction or autocommit), as
a server-side prepared statement, its row built straight into the record.
For the few reads on every request's path; everything else stays on Core.
Only columns SQLAlchemy would pass through unchanged are allowed (checked
when the statement is built), so the record is the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar, cast

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import JSON, BindParameter, Connection, Insert, bindparam, insert
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from persona_service.kernel.data.aggregates import guard_of
from persona_service.kernel.data.base import SomeTable
from persona_service.kernel.data.records import field_names

R = TypeVar("R")
S = TypeVar("S")
_DIALECT = PGDialect_psycopg()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves its __init__ unannotated
# A statement's bind parameters by name: any value psycopg adapts (a Mapping's values are covariant, so a caller's
# dict of whatever values fits).
Params = Mapping[str, object]
# The driver's rows: psycopg's default row factory makes tuples, in the statement's column order.
DriverRow = tuple[object, ...]


class Prepared(Generic[R]):
    def __init__(self, statement: ExecutableReturnsRows, record: type[R]):
        """`statement`: a read, or an UPDATE or INSERT … RETURNING (a write on the hot path, its rows the records;
        an INSERT's VALUES named by bind parameters, as many rows as it has)."""
        columns = list(statement.exported_columns)
        for column in columns:
            if column.type.result_processor(_DIALECT, None) is not None:
                raise TypeError(f"{column.key}: its type converts results; run this read through SQLAlchemy")
        self.sql = str(statement.compile(dialect=_DIALECT))
        self.record = record
        names = [column.key for column in columns]
        self._index = [names.index(name) for name in field_names(record)]

    def first(self, conn: Connection, params: Params, *, decides_nothing: bool = False) -> R | None:
        """The first row as a record, or None. `decides_nothing`: a read a write makes before it locks what it
        reads, deciding again under the lock (the lock guard lets it pass, as SQLAlchemy's DECIDES_NOTHING)."""
        row = self._cursor(conn, params, decides_nothing).fetchone()
        return None if row is None else self.record(*[row[i] for i in self._index])

    def all(self, conn: Connection, params: Params, *, decides_nothing: bool = False) -> list[R]:
        """Every row as a record (`first`'s `decides_nothing`)."""
        index = self._index
        return [self.record(*[row[i] for i in index]) for row in self._cursor(conn, params, decides_nothing)]

    def pairs(self, conn: Connection, params: Params, second: type[S], *, decides_nothing: bool = False
              ) -> list[tuple[R, S]]:
        """Every row as two records side by side (`first`'s `decides_nothing`): a read whose rows make more than
        one record, its columns the record's fields, in order, then `second`'s, cut by position."""
        cut = len(field_names(self.record))
        record = self.record
        return [(record(*row[:cut]), second(*row[cut:])) for row in self._cursor(conn, params, decides_nothing)]

    def _cursor(self, conn: Connection, params: Params, decides_nothing: bool) -> psycopg.Cursor[DriverRow]:
        return _execute(conn, self.sql, params, decides_nothing)


class PreparedInsert:
    """An INSERT of one row on every request's path (an audit entry), compiled once for `columns` (the others
    take their server defaults) and run as `Prepared` runs a read. JSON columns' values are sent as JSONB."""

    def __init__(self, statement: Insert, columns: tuple[str, ...]):
        table = statement.table
        self.sql = str(statement.inline().compile(dialect=_DIALECT, column_keys=list(columns)))  # no RETURNING
        self._json = [name for name in columns if isinstance(table.c[name].type, JSON)]

    def run(self, conn: Connection, params: dict[str, object]) -> None:
        for name in self._json:
            params[name] = Jsonb(params[name])
        if not conn.in_transaction():
            conn.begin()  # as SQLAlchemy begins on a first statement: its commit then commits this row
        _execute(conn, self.sql, params, decides_nothing=False)


class PreparedWrite(Generic[R]):
    """An INSERT (… RETURNING) on a write's path whose values are bind parameters (one row), compiled once and run
    as `Prepared` runs a read. Each value goes through its column type's own bind processing, as Core sends it
    (JSON serialized, `personas.tables.FloatArray`'s literal), a Python-side scalar default of a column left out
    is filled in (a callable one is refused), and the rows it returns come back as records. Core compiled no such
    statement again, but it still built it, coerced every value, looked its cache key up and wrapped its result:
    a persona creation's row and its version were a sixth of its server time (issue 50)."""

    def __init__(self, statement: Insert, record: type[R] | None = None):
        compiled = statement.compile(dialect=_DIALECT)
        self.sql = str(compiled)
        self._process = {name: process for name, bind in compiled.binds.items()
                         if (process := bind.type.dialect_impl(_DIALECT).bind_processor(_DIALECT)) is not None}
        self._defaults: dict[str, object] = {}
        for filled in compiled.insert_prefetch:
            default = filled.default
            if default is None or not default.is_scalar:
                raise TypeError(f"{filled.key}: a default computed in Python; give its value or use SQLAlchemy")
            self._defaults[filled.key] = default.arg  # type: ignore[attr-defined]
        self.record = record
        self._index: list[int] = []
        if record is not None:
            columns = list(statement.exported_columns)
            for column in columns:
                if column.type.result_processor(_DIALECT, None) is not None:
                    raise TypeError(f"{column.key}: its type converts results; run this through SQLAlchemy")
            names = [column.key for column in columns]
            self._index = [names.index(name) for name in field_names(record)]

    def run(self, conn: Connection, params: Params) -> list[R]:
        """The statement with `params` (every bind parameter but the defaults'); the rows it returned as records."""
        values = {**self._defaults, **params}
        for name, process in self._process.items():
            values[name] = process(values[name])
        if not conn.in_transaction():
            conn.begin()  # as `PreparedInsert`
        cursor = _execute(conn, self.sql, values, decides_nothing=False)
        if self.record is None:
            return []
        record, index = self.record, self._index
        return [record(*[row[i] for i in index]) for row in cursor]


# Row counts whose INSERT `PreparedRows` keeps compiled and prepared (a rarer, longer batch is compiled for itself).
ROWS_KEPT = 16


class PreparedRows:
    """A multi-row INSERT (a unit of work's events, a run's steps), compiled once per row count and run as
    `Prepared` runs a read. SQLAlchemy caches no INSERT of a list of rows (its cache key is None): each one was
    compiled again, about a tenth of a persona creation's server time (issue 50). The columns' values go as they
    are (checked: no type of theirs converts a value, JSON aside), JSON ones as JSONB (None as JSON null, as
    SQLAlchemy's JSON type writes it)."""

    def __init__(self, table: SomeTable, columns: tuple[str, ...]):
        for name in columns:
            kind = table.c[name].type
            if not isinstance(kind, JSON) and kind.bind_processor(_DIALECT) is not None:
                raise TypeError(f"{name}: its type converts values; insert it through SQLAlchemy")
        self.table, self.columns = table, columns
        self._json = frozenset(name for name in columns if isinstance(table.c[name].type, JSON))
        self._sql: dict[int, str] = {}

    def sql(self, count: int) -> str:
        sql = self._sql.get(count)
        if sql is None:
            rows: list[dict[str, BindParameter[object]]] = [
                {name: bindparam(f"{name}_{i}") for name in self.columns} for i in range(count)]
            sql = str(insert(self.table).values(rows).compile(dialect=_DIALECT))
            if count <= ROWS_KEPT:
                self._sql[count] = sql
        return sql

    def run(self, conn: Connection, rows: Sequence[Params]) -> None:
        """`rows` (each with every column named), in one statement, in their order."""
        if not rows:
            return
        json, params = self._json, dict[str, object]()
        for i, row in enumerate(rows):
            for name in self.columns:
                params[f"{name}_{i}"] = Jsonb(row[name]) if name in json else row[name]
        if not conn.in_transaction():
            conn.begin()  # as `PreparedInsert`
        _execute(conn, self.sql(len(rows)), params, decides_nothing=False, prepare=len(rows) <= ROWS_KEPT)


def _execute(conn: Connection, sql: str, params: Params, decides_nothing: bool,
             prepare: bool = True) -> psycopg.Cursor[DriverRow]:
    # The psycopg dialect's driver connection (SQLAlchemy types it as whatever DBAPI connection), default rows.
    raw = cast("psycopg.Connection[DriverRow] | None", conn.connection.driver_connection)
    assert raw is not None
    guard = guard_of(conn.engine)
    if guard is not None:
        guard.check_on(conn, sql, decides_nothing)
    # A connection opened without prepared statements (make_engine(prepared=False)) runs it unprepared.
    prepare = prepare and raw.prepare_threshold is not None
    return raw.execute(sql, params, prepare=prepare)
