"""The boundary guard: the layout's rules checked on what runs, not on how it is spelt.

tests/test_architecture.py and lint-imports read the source, so they catch the spellings they were written
for (a reviewer planted 27 violations and 19 passed them: issue 47). This guard, on in every test stack
(`PERSONA_BOUNDARY_GUARD=1`, off by default), watches four things happen and finds who did them by the
Python stack (the innermost frame of a domain's code, `persona_service/<domain>/…`; kernel, providers and
third-party frames are skipped):

- SQL naming another domain's tables: the tables each statement the driver is handed names (psycopg's
  cursor, below SQLAlchemy's `before_cursor_execute`, so `Prepared` reads and a driver connection used
  directly count too), against the owner of each, the module whose tables.py declares it; the kernel's
  tables are everyone's. A domain reads another's rows through that domain's api.py, whose repository runs
  the SQL, so the innermost domain frame is the owner's.
- A commit that is not its unit of work's (the engine's `commit` event): a unit of work's transaction ends
  only in `UnitOfWork.commit` (the pipeline's Commit stage), any other only in jobs, commands, module.py
  and the kernel's own paths (migrations, the task runner, the audit log, `read_apart`); a servicer ends
  none itself, and no domain sends COMMIT/ROLLBACK as SQL nor commits the driver's connection.
- Network from a service or repository (an audit hook on `socket.connect` and `socket.getaddrinfo`): the
  innermost frame of the package must not be a file named `service`/`repository`; network happens in
  client code (the kernel's Redis and object store, the providers, a domain's client file: files/s3.py,
  billing/stripe_processor.py, webhooks/http.py).
- Redis from a domain (every command a redis-py connection sends: `execute_command`, pipelines, pub/sub):
  the innermost frame of the package must be the kernel's (a capability: hints, the limiter, runs), never a
  domain's.

Declared exceptions: `DECLARED`, (domain, table) -> why, lets a domain touch a table it does not own, and
`PORTS` names kernel code that runs statements an owner handed it (checked where they are handed over). Each
check raises `BoundaryViolation` (an AssertionError: a 500 the suite sees; a background job logs it, and the
test stack's end fails on the log line). Attributing a frame is cached per code object and a statement's
tables per SQL string. It reads frames only to refuse, never to decide what a call does.
"""

from __future__ import annotations

import functools
import pathlib
import re
import sys
import tomllib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, cast

from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.sql import ClauseElement

from persona_service.kernel.data.base import Base
from persona_service.kernel.data.uow import UnitOfWork

_PACKAGE = "/persona_service/"
_SHARED = {"kernel", "providers", "process"}  # infrastructure (the process assembly too), not a domain
_ROLES_TOML = pathlib.Path(__file__).resolve().parents[2] / "roles.toml"
_NAMED_ROLES = ("servicer", "service", "repository", "tables", "records", "settings", "api", "module", "jobs",
                "commands", "support")
# Where a transaction may end: a servicer's is its call's unit of work, which the pipeline commits; the rest
# work in their caller's.
_ENDS_TRANSACTIONS = {"jobs", "commands", "module", "migrations"}
_NO_NETWORK = {"service", "repository"}  # by file name (`service.py`, `keys_repository.py`)
KERNEL = "kernel"  # the owner of the kernel's tables (kernel/data/tables.py), which every domain may use


class BoundaryViolation(AssertionError):
    """A domain's code did what its boundary refuses (another domain's tables, a commit outside its unit of
    work, network from a service or repository, Redis but through the kernel)."""


@dataclass(frozen=True)
class Place:
    """Whose code a frame runs: `domain` ('' for the kernel, providers, the package's top and callers outside
    it; None for a library), the file's `role` (its name's, else roles.toml's) and `named` (its name's only)."""

    domain: str | None
    file: str = ""
    role: str = ""
    named: str = ""

    @property
    def in_domain(self) -> bool:
        return bool(self.domain)

    def __str__(self) -> str:
        return f"{self.domain}/{self.file}.py" if self.domain else "the kernel" if self.domain == "" else "a library"


_OUTSIDE = Place(None)  # a library's frame (the standard library, site-packages): transparent
_KERNEL = Place("")
# Code neither of the package nor of a library (a test's stand-in for a capability, a script) calls the package
# as the kernel would: it is not judged, and what it does is not its callee's.
_LIBRARIES = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})


@functools.cache
def _roles_toml() -> dict[str, dict[str, str]]:
    return tomllib.loads(_ROLES_TOML.read_text())


def _named_role(stem: str) -> str:
    return next((role for role in _NAMED_ROLES if stem == role or stem.endswith("_" + role)), "")


def _classify(filename: str) -> Place:
    at = filename.rfind(_PACKAGE)
    if at < 0:
        library = filename.startswith(_LIBRARIES) or "site-packages" in filename or filename.startswith("<")
        return _OUTSIDE if library else _KERNEL
    parts = filename[at + len(_PACKAGE):].removesuffix(".py").split("/")
    if len(parts) < 2 or parts[0] in _SHARED:
        return _KERNEL
    domain, stem = parts[0], parts[-1]
    if "migrations" in parts:
        return Place(domain, stem, "migrations")
    named = _named_role(stem)
    return Place(domain, stem, named or _roles_toml().get(domain, {}).get(stem, ""), named)


# By id(code): a code object's own hash reads its whole body, each time. `_SEEN` keeps each code alive, so its
# id is never another's.
_PLACES: dict[int, Place] = {}
_SEEN: list[CodeType] = []


def _place(code: CodeType) -> Place:
    found = _PLACES.get(id(code))
    if found is None:
        _SEEN.append(code)
        found = _PLACES[id(code)] = _classify(code.co_filename)
    return found


def _codes(start: FrameType | None) -> Iterator[CodeType]:
    for frame, _ in traceback.walk_stack(start):
        yield frame.f_code


def _innermost(start: FrameType | None, keep: Callable[[Place], bool]) -> Place | None:
    """The innermost frame's place (from `start` outwards) that `keep` accepts, if any."""
    return next((place for place in map(_place, _codes(start)) if keep(place)), None)


def _caller() -> FrameType:
    return sys._getframe(2)  # the frame that called the function calling this one


def _innermost_domain(start: FrameType | None) -> Place | None:
    """The innermost domain frame's place; None when there is none, or a declared port (`PORTS`) comes first."""
    places, ports = _PLACES, PORTS
    for frame, _ in traceback.walk_stack(start):  # (the hot loop: a statement's stack, inline)
        key = id(frame.f_code)
        if key in ports:
            return None
        place = places.get(key) or _place(frame.f_code)
        if place.domain:
            return place
    return None


def _innermost_of_package(start: FrameType | None) -> Place | None:
    return _innermost(start, lambda p: p.domain is not None)


# --- tables -------------------------------------------------------------------------------

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_TOKEN = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][\w$]*)|(\.)')
_SCHEMA = "public"
_CACHED_STATEMENTS = 20_000  # distinct SQL strings kept (a server sends a few hundred)


def _named_tables(sql: str, tables: frozenset[str]) -> frozenset[str]:
    """The names of `tables` that `sql` uses as tables: bare, quoted or schema-qualified, wherever they stand
    (a subquery, a CTE, a join); a name after another's dot (`alias.column`) is a column, `public.x` a table,
    and a foreign key's target in DDL (`REFERENCES organizations`) is named, not touched."""
    found, before = set(), ["", ""]  # the two tokens before this one
    for match in _TOKEN.finditer(_LITERAL.sub("''", sql)):
        quoted, bare, dot = match.groups()
        token = dot or (quoted.replace('""', '"') if quoted is not None else bare.lower())
        qualified = before[1] == "." and before[0] != _SCHEMA
        if not dot and token in tables and not qualified and "references" not in (before[1], before[0]):
            found.add(token)
        before = [before[1], token]
    return frozenset(found)


def table_owners() -> dict[str, str]:
    """Each table's owner: the domain whose tables.py declares it (maps a class to it), else `KERNEL`."""
    modules = {id(mapper.local_table): mapper.class_.__module__ for mapper in Base.registry.mappers}
    return {name: _classify("/" + modules.get(id(table), "").replace(".", "/") + ".py").domain or KERNEL
            for name, table in Base.metadata.tables.items()}


# --- the guard ---------------------------------------------------------------------------

# (domain, table) -> why that domain's code may touch a table another domain owns.
DECLARED: dict[tuple[str, str], str] = {}
# Kernel code that runs, for another domain, statements an owner built and handed it through a port; a
# statement sent from inside it is not judged by its caller (the port checks it where it is built,
# `check_statement`). By id(code): code -> why. Declared by the port's module (`declare_port`).
PORTS: dict[int, tuple[CodeType, str]] = {}


def declare_port(function: Callable[..., Any], why: str) -> None:
    PORTS[id(function.__code__)] = (function.__code__, why)


def check_statement(conn: Connection, stmt: Executable, start: FrameType | None) -> None:
    """`check_sql` on a statement a port will run later, where its owner hands it over."""
    if _state["on"]:
        check_sql(str(cast(ClauseElement, stmt).compile(dialect=conn.dialect)), start)

_ENDS_SQL = re.compile(r"^\s*(?:COMMIT|END|ABORT|ROLLBACK(?!\s+TO\b)|PREPARE\s+TRANSACTION)\b", re.IGNORECASE)
_UOW = "boundaries.unit_of_work"  # conn.info: this transaction is a unit of work's
_UOW_OPENS = UnitOfWork.conn.fget.__code__  # type: ignore[attr-defined]
_UOW_COMMITS = UnitOfWork.commit.__code__
_SQLALCHEMY = "/sqlalchemy/"


class Tables:
    """Each table's owner, and the tables a statement names (cached per SQL string)."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}
        self._named: dict[str, frozenset[str]] = {}

    def owners(self) -> dict[str, str]:
        if len(self._owners) != len(Base.metadata.tables):  # modules imported since: read again
            self._owners, self._named = table_owners(), {}
        return self._owners

    def named(self, sql: str) -> frozenset[str]:
        found = self._named.get(sql)
        if found is None:
            if len(self._named) >= _CACHED_STATEMENTS:
                self._named.clear()
            found = self._named[sql] = _named_tables(sql, frozenset(self.owners()))
        return found


_TABLES = Tables()


def check_sql(sql: str, start: FrameType | None) -> None:
    """Raise when the domain whose code sent `sql` (the innermost domain frame from `start`) names another
    domain's table but as `DECLARED`, or ends the transaction in SQL."""
    place = _innermost_domain(start)
    if place is None:
        return
    if _ENDS_SQL.match(sql):
        raise BoundaryViolation(f"{place} ended a transaction in SQL (the unit of work commits): {sql[:160]}")
    owners = _TABLES.owners()
    foreign = sorted(t for t in _TABLES.named(sql)
                     if owners[t] not in (place.domain, KERNEL) and (place.domain, t) not in DECLARED)
    if foreign:
        raise BoundaryViolation(
            f"{place} touched {', '.join(f'{t} ({owners[t]})' for t in foreign)}, another domain's tables "
            f"(read them through that domain's api.py): {sql[:160]}")


def check_commit(conn: Connection, start: FrameType | None) -> None:
    """Raise when a domain's code commits: a unit of work's transaction but in `UnitOfWork.commit`, any other
    but in a job, a command or module.py. The committer is the innermost frame of the package: the kernel's
    own transactions (the audit log a provider's retry writes, a task's claim) end in the kernel, whoever
    called the capability, and code outside the package (a test) is not checked."""
    codes = list(_codes(start))
    place = next((p for p in map(_place, codes) if p.domain is not None), None)
    if place is None or not place.in_domain:
        return
    if conn.info.get(_UOW):
        if not any(code is _UOW_COMMITS for code in codes):
            raise BoundaryViolation(f"{place} committed a unit of work's transaction (only UnitOfWork.commit, "
                                    "the pipeline's Commit stage, does)")
    elif place.role not in _ENDS_TRANSACTIONS:
        raise BoundaryViolation(f"{place} ({place.role or 'no role'}) committed a transaction: only jobs, "
                                "commands and module.py end one (a call's ends in its unit of work)")


def check_driver_commit(start: FrameType | None) -> None:
    """The driver's connection is committed by SQLAlchemy (whose `commit` event `check_commit` reads), never
    by a domain's code beneath it."""
    for code in _codes(start):
        if _SQLALCHEMY in code.co_filename:
            return
        place = _place(code)
        if place.in_domain:
            raise BoundaryViolation(f"{place} committed the driver's connection beneath SQLAlchemy")


def check_network(start: FrameType | None) -> None:
    place = _innermost_of_package(start)
    if place is not None and place.named in _NO_NETWORK:
        raise BoundaryViolation(f"{place} opened a network connection: a {place.named} calls the kernel's "
                                "clients (or its domain's client file), never the network")


def check_redis(start: FrameType | None) -> None:
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} sent a Redis command itself: a domain reaches Redis through a kernel "
                                "capability (its door, kernel/api.py)")


# --- where the checks are installed ------------------------------------------------------------


class BoundaryGuard:
    """The commit checks on an engine (`install`), with the process's hooks (`install_process`)."""

    @staticmethod
    def _begin(conn: Connection) -> None:
        conn.info[_UOW] = any(code is _UOW_OPENS for code in _codes(_caller()))

    @staticmethod
    def _end(conn: Connection) -> None:
        if not conn.invalidated:
            conn.info.pop(_UOW, None)

    def _commit(self, conn: Connection) -> None:
        if _state["on"]:
            check_commit(conn, _caller())
        self._end(conn)

    def install(self, engine: Engine) -> None:
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._end)
        install_process()


_NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo"}
_state = {"installed": False, "on": False}


def _audit(name: str, args: tuple[Any, ...]) -> None:
    if name in _NETWORK_EVENTS and _state["on"]:
        check_network(sys._getframe(1))


def _checked(method: Callable[..., Any], check: Callable[[Any, FrameType], None]) -> Callable[..., Any]:
    """`method`, running `check(its first argument after self, its caller's frame)` first while the guard is on."""
    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _state["on"]:
            check(args[0] if args else None, sys._getframe(1))
        return method(self, *args, **kwargs)
    return guarded


def _sql_of(query: Any, start: FrameType) -> None:
    check_sql(query.decode() if isinstance(query, bytes) else str(query), start)


def install_process() -> None:
    """Turn the SQL, network and Redis checks on in this process (the hooks stay: Python cannot remove an
    audit hook, so `guarding(False)` turns them off)."""
    if not _state["installed"]:
        import psycopg
        import redis.connection

        sys.addaudithook(_audit)
        hooks: list[tuple[type, str, Callable[[Any, FrameType], None]]] = [
            *((cls, name, _sql_of) for cls in (psycopg.Cursor, psycopg.ServerCursor)
              for name in ("execute", "executemany", "stream", "copy")),
            (psycopg.Connection, "commit", lambda _, start: check_driver_commit(start)),
            (redis.connection.AbstractConnection, "send_packed_command", lambda _, start: check_redis(start)),
        ]
        for cls, name, check in hooks:
            if name in vars(cls):  # (ServerCursor overrides execute only)
                setattr(cls, name, _checked(getattr(cls, name), check))
        _state["installed"] = True
    _state["on"] = True


def guarding(on: bool) -> bool:
    """Turn this process's checks on or off; whether they were on (a test turns them back as they were)."""
    was = _state["on"]
    if on:
        install_process()
    else:
        _state["on"] = False
    return was
