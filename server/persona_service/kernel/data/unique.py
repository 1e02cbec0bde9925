"""Unique violations: a caller's conflict, never a 500.

Two requests that both checked a value was free and then insert it race to
PostgreSQL's unique index; the loser's statement fails with SQLSTATE 23505.
The error translator (`kernel.transport.stages.outcome.translate`) answers
any such failure, on any RPC, as 409 `state_conflict` whose
`details.conflictField` is what the constraint declares: a unique index or
constraint carries it in its SQLAlchemy `info` (`info={"conflict_field":
"userName"}`); an undeclared one names its columns. As if the winner had
run first: the loser is the request a serial order answers with the conflict.

Where the service derived the value itself (a slug from a name) a conflict
is its own to resolve: `derive_unique` inserts with ON CONFLICT DO NOTHING on
that index and, when the index already held the value, derives the next
candidate and tries again (no savepoint: one statement a try).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg
from sqlalchemy import Connection, ForeignKeyConstraint, Index, UniqueConstraint, text
from sqlalchemy import exc as sa_exc

from persona_service.kernel.data.aggregates import SCOPE_PARAMETER, SCOPE_SEPARATOR
from persona_service.kernel.data.base import Base, SomeTable
from persona_service.kernel.errors import NotFound, StateConflict

T = TypeVar("T")
C = TypeVar("C")
UNIQUE_VIOLATION = "23505"
FOREIGN_KEY_VIOLATION = "23503"
# Candidates a derivation tries before the conflict is the caller's (each try is one INSERT).
DERIVATIONS = 8


def violated_unique(exc: BaseException) -> str | None:
    """The name of the unique index or constraint `exc` violated, or None
    when `exc` is not a unique violation."""
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    if not isinstance(orig, psycopg.errors.UniqueViolation) and getattr(orig, "sqlstate", None) != UNIQUE_VIOLATION:
        return None
    diag = getattr(orig, "diag", None)
    return (getattr(diag, "constraint_name", None) or "") if diag is not None else ""


def conflict_of(exc: BaseException) -> StateConflict | None:
    """The declared 409 for a unique violation, or None for any other error."""
    name = violated_unique(exc)
    return None if name is None else _conflict(name)


def _conflict(name: str) -> StateConflict:
    """The 409 the unique index or constraint `name` declares."""
    field = _conflict_fields().get(name, "")
    return StateConflict(f"Another resource already has this {field or 'value'}.", field,
                         {"constraint": name} if not field else None)


def gone_reference(exc: BaseException) -> NotFound | None:
    """A foreign-key violation as a serial order answers it: the row written referred to one another request
    deleted meanwhile (a delivery replayed while its endpoint went), so the referenced resource does not exist
    (404 naming it); None for any other error. Writes that lock what they refer to first never get here."""
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    if getattr(orig, "sqlstate", None) != FOREIGN_KEY_VIOLATION:
        return None
    diag = getattr(orig, "diag", None)
    name = getattr(diag, "constraint_name", None) or ""
    referred = _referred_tables().get(name, "")
    return NotFound(referred.removesuffix("s").replace("_", " ") if referred else "resource")


_REFERRED: dict[str, str] = {}


def _referred_tables() -> dict[str, str]:
    """Foreign-key constraint name -> the table it refers to (PostgreSQL's default name where none is given)."""
    if not _REFERRED:
        for table in Base.metadata.tables.values():
            for constraint in table.constraints:
                if isinstance(constraint, ForeignKeyConstraint):
                    columns = "_".join(c.name for c in constraint.columns)
                    name = str(constraint.name) if constraint.name else f"{table.name}_{columns}_fkey"
                    _REFERRED[name] = constraint.referred_table.name
    return _REFERRED


def derive_unique(constraint: str, candidate: Callable[[int], C], insert: Callable[[C], T | None],
                  tries: int = DERIVATIONS) -> T:
    """`insert(candidate(n))` for n = 0, 1, ... until one is written. `insert` writes with ON CONFLICT DO
    NOTHING on the unique index `constraint` and answers None when the index already held the value (one
    committed, or one a concurrent transaction committed: PostgreSQL waits for it, and takes the value if it
    rolled back), so the answer is a serial order's. Another index's violation propagates; the last try's
    refusal is the conflict the translator would answer for it."""
    for attempt in range(tries):
        row = insert(candidate(attempt))
        if row is not None:
            return row
    raise _conflict(constraint)


_FIELDS: dict[str, str] = {}


def _conflict_fields() -> dict[str, str]:
    """Constraint name -> conflictField, from every table's declarations
    (read once all modules' tables are imported, i.e. at the first conflict)."""
    if not _FIELDS:
        for table in Base.metadata.tables.values():
            _FIELDS.update(_declared(table))
    return _FIELDS


def _declared(table: SomeTable) -> dict[str, str]:
    fields: dict[str, str] = {}
    for index in table.indexes:
        if index.unique and index.name:
            fields[str(index.name)] = _field(index)
    for constraint in table.constraints:
        if isinstance(constraint, UniqueConstraint):
            columns = [c.name for c in constraint.columns]
            # Unnamed (`unique=True`): PostgreSQL names it <table>_<columns>_key.
            name = str(constraint.name) if constraint.name else f"{table.name}_{'_'.join(columns)}_key"
            fields[name] = _field(constraint)
    return fields


def _field(item: Index | UniqueConstraint) -> str:
    declared = item.info.get("conflict_field")
    if declared:
        return str(declared)
    # The tenant columns scope the value; an expression (lower(name)) names no column: declare it.
    return ",".join(_camel(c.name) for c in item.columns if c.name not in ("org_id", "workspace_id"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def once_per(conn: Connection, *scope: str) -> None:
    """Hold `scope` (e.g. the purchase of one listing by one organization)
    until the transaction ends: a concurrent duplicate of a "once per"
    operation waits for the first, then reads what it committed and answers
    as it would one after the other, instead of losing the insert race."""
    conn.execute(text(f"SELECT pg_advisory_xact_lock(hashtextextended(:{SCOPE_PARAMETER}, 0))"),
                 {SCOPE_PARAMETER: SCOPE_SEPARATOR.join(scope)})
