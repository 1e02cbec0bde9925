"""Aggregates: the rows one write decides on, and the one way to write them.

An aggregate is a root row and the rows that belong to it: a chat session
with its messages and their alternatives, a webhook endpoint with its
deliveries, a SCIM user with its e-mails. Two writes of one aggregate answer
as one serial order when each locks the root first (`lock_root`: `SELECT …
FOR UPDATE` on the root's row) and only then reads what it decides on (the
last turn, the chosen alternative, an endpoint that still exists): the second
waits for the first to commit and then decides on what the first left. A
write touching two aggregates locks their roots in `ORDER` (declaration
order, then id), so two such writes wait in a line, never in a cycle. An
atomic `UPDATE`/`DELETE` of the root, or the `INSERT` of a new one, locks it
as well (PostgreSQL locks the rows a statement changes).

A module declares its aggregates (`declare`) with the tables that belong to
each; `lock_root` is the door. The other way round (reading a message before
the session is locked, writing a delivery while its endpoint is free to go)
is caught by `LockGuard`, which the test stacks turn on
(`PERSONA_LOCK_GUARD=1`): in a writing transaction, the first statement that
touches one of an aggregate's tables must lock its root, or it raises
`LockOrderViolation` (a 500 the suite sees). It also refuses a root locked
after the root of an aggregate that comes later in the lock order
(`LockGuard.order`) or after a lock by name (`pg_advisory_xact_lock`: what
has no row comes last), and a root declared `before_members` locked after the
caller's membership hold: two writes taking two roots in opposite orders
would wait in a cycle (a deadlock PostgreSQL breaks, rerun by the Commit
stage), and the guard names the second lock at once. It reads the SQL that
reaches the driver, so it holds whatever spelled the statement (Core,
`text()`, a subquery string), not only the calls it was written for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import ColumnElement, Connection, Engine, event, select
from sqlalchemy.engine.interfaces import ExecutionContext

from persona_service.kernel.data.base import Base, SomeTable
from persona_service.kernel.data.records import record_or_none, records

R = TypeVar("R")


@dataclass(frozen=True)
class Aggregate:
    name: str
    root: SomeTable
    members: tuple[SomeTable, ...] = ()  # the tables whose rows belong to a root row
    # Locked before any membership (SCIM's groups and users: the erasure and SCIM's writes take them, then the
    # memberships they end or regrant), so first in the lock order, and never after the caller's hold.
    before_members: bool = False

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.root.name, *(t.name for t in self.members))


ORDER: list[Aggregate] = []  # every declared aggregate, in lock order


def declare(name: str, root: SomeTable, *members: SomeTable, before_members: bool = False) -> Aggregate:
    """An aggregate of `root` and `members` (once per name: a module's import declares it); `before_members`:
    its roots are locked before any organization membership (see `Aggregate.before_members`)."""
    for known in ORDER:
        if known.name == name:
            return known
    aggregate = Aggregate(name, root, members, before_members)
    ORDER.append(aggregate)
    return aggregate


# Scopes of locks by name (`unique.once_per`'s first part) that come with the `before_members` roots instead of last:
# an address a SCIM user's identity holds, which its creation decides its user by before it writes anything else
# (the rest of the lock order follows it), and its PUT takes after the user's row.
BEFORE_MEMBERS_NAMES: set[str] = set()
# How `unique.once_per` passes a lock's scope (its parts joined): the guard reads the first part from it.
SCOPE_PARAMETER, SCOPE_SEPARATOR = "scope", "\x1f"


def declare_named_lock(scope: str) -> None:
    """Locks by name of `scope` come right after the `before_members` roots (see `BEFORE_MEMBERS_NAMES`)."""
    BEFORE_MEMBERS_NAMES.add(scope)


def lock_order(aggregates: list[Aggregate]) -> list[Aggregate]:
    """The lock order: the `before_members` aggregates, then the rest, each in declaration order."""
    return [a for a in aggregates if a.before_members] + [a for a in aggregates if not a.before_members]


def first_lock_of(package: str) -> int:
    """Where the first aggregate of a domain (persona_service.<package>, whose model maps its root) comes in the lock
    order (after every one: it has none). A person's erasure runs each domain's eraser in this order
    (kernel.module.Modules.erasers)."""
    domains = {m.local_table: m.class_.__module__.split(".")[1:2] for m in Base.registry.mappers}
    order = lock_order(ORDER)
    return next((i for i, a in enumerate(order) if domains.get(a.root) == [package]), len(order))


def lock_root(conn: Connection, aggregate: Aggregate, record: type[R], *where: ColumnElement[bool]) -> R | None:
    """The root row matching `where` as a `record`, locked until the transaction ends (None: no such row).
    Call it before reading anything of the aggregate that the write decides on."""
    stmt = select(aggregate.root).where(*where).with_for_update()
    return record_or_none(record, conn.execute(stmt).mappings().first())


def lock_roots(conn: Connection, aggregate: Aggregate, record: type[R], ids: list[str]) -> list[R]:
    """Several roots of one aggregate, locked in id order (two such writes never wait on each other in a cycle)."""
    root = aggregate.root
    stmt = select(root).where(root.c.id.in_(ids)).order_by(root.c.id).with_for_update()
    return records(record, conn.execute(stmt).mappings())


# An execution option for a read a write makes without deciding on it (a privacy export copying a user's
# messages): the one way past the guard, named where it is taken.
DECIDES_NOTHING = "decides_nothing"


class LockOrderViolation(AssertionError):
    """A write read or changed an aggregate's rows before it held the aggregate's root, or ran a statement
    before the hold its unit of work must begin with (`expect_hold`)."""


# A writing transaction whose next statement must be the hold its unit of work begins with (the caller's
# membership, kernel.transport.stages.hold), the hold while it runs, and whether the transaction ran a statement
# yet (kept by the guard only): `conn.info` keys the guard reads.
_HOLD_DUE = "aggregates_hold_due"
_HOLDING = "aggregates_holding"
_RAN = "aggregates_ran"


def expect_hold(conn: Connection) -> None:
    """From here, `conn`'s first statement must run inside `holding` (the guard refuses any other), and it must be
    its transaction's first: a statement run before in that transaction (a kernel stage's read or write before the
    operation, left uncommitted) would hold its locks before the hold, so the guard refuses the unit of work."""
    if conn.info.get(_RAN):
        raise LockOrderViolation(
            "a write's unit of work ran statements before its caller's membership hold was due (what the stages "
            "before the operation run must end before it: kernel.transport.stages.hold.due)")
    conn.info[_HOLD_DUE] = True


@contextmanager
def holding(conn: Connection) -> Iterator[None]:
    """The statements of the hold `expect_hold` asked for: they settle it."""
    conn.info[_HOLDING] = True
    try:
        yield
    finally:
        conn.info.pop(_HOLDING, None)
        conn.info.pop(_HOLD_DUE, None)
    conn.info[_MEMBER_HELD] = True


_KIND = re.compile(r"^\s*(?:WITH\b.*?\)\s*)?(SELECT|INSERT|UPDATE|DELETE)\b", re.IGNORECASE | re.DOTALL)
# FOR SHARE too: a write that decides on another aggregate without changing it (a reply checks its persona is
# still active) holds it against changes, and that is enough (KEY SHARE is not: it lets the root's columns change).
_LOCKING = re.compile(r"\bFOR\s+(?:(?:NO\s+KEY\s+)?UPDATE|SHARE)\b", re.IGNORECASE)
_LOCKED = "aggregates_locked"
_MEMBER_HELD = "aggregates_member_held"  # the caller's membership is held in this transaction (`holding`)
# An INSERT of a new root (an upsert that may update an existing row, `DO UPDATE`, locks that row: not this).
_INSERT = re.compile(r"^\s*INSERT\b(?!.*\bDO\s+UPDATE\b)", re.IGNORECASE | re.DOTALL)
# A lock by name held to the transaction's end (an e-mail's owner, a purchase, a unique key's scope): what has no
# row to lock comes last in the lock order, after every root.
_BY_NAME = re.compile(r"\bpg_(?:try_)?advisory_xact_lock(?:_shared)?\s*\(", re.IGNORECASE)


@dataclass
class Held:
    """What a writing transaction holds, as the guard saw it: the aggregates whose root it locked or inserted
    (`locked`: their members may be read), and of those the ones locked on existing rows (`ordered`: a root
    locked later must come after each of them in the lock order)."""

    locked: set[str]
    ordered: set[str]
    by_name: bool = False  # a transaction-scoped lock by name taken (the last step of the lock order)


def _names(name: str) -> str:
    return rf'(?:"?public"?\.)?"?{name}"?'


class LockGuard:
    """Checks each statement of a writing transaction against the lock-the-root-first rule
    (for the aggregates in `aggregates`, a list modules may still add to: read at each check)."""

    def __init__(self, aggregates: list[Aggregate]) -> None:
        self.aggregates = aggregates
        self._patterns: dict[str, tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]] = {}
        self._order: tuple[int, list[Aggregate]] = (-1, [])

    @property
    def order(self) -> list[Aggregate]:
        """`lock_order` of the aggregates, kept until one more is declared."""
        if self._order[0] != len(self.aggregates):
            self._order = (len(self.aggregates), lock_order(self.aggregates))
        return self._order[1]

    def _of(self, a: Aggregate) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
        """(touches any of its tables, changes its root, names its root in a FROM)."""
        found = self._patterns.get(a.name)
        if found is None:
            root = _names(a.root.name)
            found = self._patterns[a.name] = (
                re.compile(r"\b(?:" + "|".join(_names(t) for t in a.tables) + r")\b", re.IGNORECASE),
                re.compile(rf"^\s*(?:UPDATE|DELETE\s+FROM|INSERT\s+INTO)\s+{root}\b", re.IGNORECASE),
                re.compile(rf"\bFROM\s+{root}\b", re.IGNORECASE),
            )
        return found

    def install(self, engine: Engine) -> None:
        event.listen(engine, "begin", self._reset)
        event.listen(engine, "commit", self._ended)
        event.listen(engine, "rollback", self._ended)
        event.listen(engine, "before_cursor_execute", self._check)
        _GUARDS[id(engine)] = self

    @staticmethod
    def _reset(conn: Connection) -> None:
        """A transaction begins (a hold due, `expect_hold` after a commit, stays due: it is this one's)."""
        if not conn.invalidated:  # (a connection the database dropped is rolled back with nothing to reset)
            conn.info[_LOCKED] = Held(set(), set())
            conn.info.pop(_MEMBER_HELD, None)
            conn.info.pop(_RAN, None)

    @classmethod
    def _ended(cls, conn: Connection) -> None:
        cls._reset(conn)
        if not conn.invalidated:
            conn.info.pop(_HOLD_DUE, None)

    def check(self, sql: str, held: Held, member_held: bool = False, scope: str | None = None) -> None:
        """Raise when `sql`, run in a writing transaction holding `held` (and the caller's membership, when
        `member_held`), breaks the rule: a member or an unlocked root touched before its root is locked, a root
        locked after one that comes later in `order` or after a lock by name, a `before_members` root locked after
        the membership.
        Only an aggregate's first lock is ordered: from SQL alone a second lock of its roots may be the same
        row again (an accounting UPDATE of the session a write locked first)."""
        if _BY_NAME.search(sql):
            self._by_name(sql, held, member_held, (scope or "").split(SCOPE_SEPARATOR, 1)[0])
            return
        kind = _KIND.match(sql)
        selects_for_update = kind is not None and kind.group(1).upper() == "SELECT" and _LOCKING.search(sql)
        order = self.order
        for rank, aggregate in enumerate(order):
            if aggregate.name in held.locked:
                continue
            touches, changes_root, from_root = self._of(aggregate)
            if not touches.search(sql):
                continue
            if changes_root.match(sql) or (selects_for_update and from_root.search(sql)):
                held.locked.add(aggregate.name)
                if _INSERT.match(sql):
                    continue  # a new row: nobody else can be waiting for it, so it takes no place in the order
                later = [a.name for a in order[rank + 1:] if a.name in held.ordered]
                if later:
                    raise LockOrderViolation(
                        f"{aggregate.name}: its root locked after {', '.join(later)}'s, against the lock order "
                        f"({', '.join(a.name for a in order)}; docs/concurrency.md): {sql[:160]}")
                if held.by_name:
                    raise LockOrderViolation(
                        f"{aggregate.name}: its root locked after a lock by name (what has no row comes last in "
                        f"the lock order; docs/concurrency.md): {sql[:160]}")
                if aggregate.before_members and member_held:
                    raise LockOrderViolation(
                        f"{aggregate.name}: its root locked after the caller's membership hold (its roots come "
                        f"before any membership: the erasure's order; docs/concurrency.md): {sql[:160]}")
                held.ordered.add(aggregate.name)
                continue
            raise LockOrderViolation(
                f"{aggregate.name}: a write touched {aggregate.tables} before locking its root "
                f"({aggregate.root.name}; kernel.data.aggregates.lock_root): {sql[:160]}")

    def _by_name(self, sql: str, held: Held, member_held: bool, scope: str) -> None:
        """A lock by name: last in the lock order, or, for a scope declared `declare_named_lock`, right after the
        `before_members` roots (so before any other root, any other lock by name and the caller's hold)."""
        if scope not in BEFORE_MEMBERS_NAMES:
            held.by_name = True
            return
        later = [a.name for a in self.order if a.name in held.ordered and not a.before_members]
        if later or held.by_name or member_held:
            after = ", ".join(later) or ("a lock by name" if held.by_name else "the caller's membership hold")
            raise LockOrderViolation(f"a lock by name of {scope!r} taken after {after} (it comes right after "
                                     f"the SCIM roots in the lock order; docs/concurrency.md): {sql[:160]}")

    def check_on(self, conn: Connection, sql: str, decides_nothing: bool = False, scope: str | None = None) -> None:
        """`check` for a statement run on `conn` (a read-only unit of work, in autocommit, decides nothing), after
        the hold `conn`'s unit of work must begin with, if one is due (even a read that decides nothing)."""
        info = conn.info
        info[_RAN] = True
        if info.get(_HOLD_DUE) and not info.get(_HOLDING):
            raise LockOrderViolation(
                "a write ran a statement before the caller's membership hold its unit of work begins with "
                f"(kernel.transport.stages.hold): {sql[:160]}")
        driver = conn.connection.driver_connection
        if decides_nothing or driver is None or getattr(driver, "autocommit", False):
            return
        held = info.get(_LOCKED)
        if held is None:
            held = info[_LOCKED] = Held(set(), set())
        self.check(sql, held, bool(info.get(_MEMBER_HELD)), scope)

    def _check(self, conn: Connection, cursor: object, statement: str, parameters: object,
               context: ExecutionContext | None, executemany: bool) -> None:
        scope = parameters.get(SCOPE_PARAMETER) if isinstance(parameters, dict) else None  # once_per's lock
        self.check_on(conn, statement, context is not None and bool(context.execution_options.get(DECIDES_NOTHING)),
                      scope if isinstance(scope, str) else None)


_GUARDS: dict[int, LockGuard] = {}  # by id(engine): statements run past SQLAlchemy's events (`Prepared`)


def guard_of(engine: Engine) -> LockGuard | None:
    return _GUARDS.get(id(engine))
