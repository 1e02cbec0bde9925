"""The boundary guard: the layout's rules checked on what runs, not on how it is spelt.

tests/test_architecture.py and lint-imports read the source, so they catch the spellings they were written
for (a reviewer planted 27 violations and 19 passed them: issue 47). This guard, on in every test stack
(`PERSONA_BOUNDARY_GUARD=1`, off by default), watches what the capabilities beneath a domain do (the driver,
every engine, the sockets, redis-py) and finds who did it by the Python stack (the innermost frame of a domain's
code, `persona_service/<domain>/…`; kernel, providers and third-party frames are skipped):

- SQL naming another domain's tables: the tables each statement the driver is handed names (psycopg's
  cursors, blocking and asyncio, below SQLAlchemy's `before_cursor_execute`, so `Prepared` reads and a driver
  connection used directly count too), against the owner of each, the module whose tables.py declares it; the
  kernel's tables are everyone's. A domain reads another's rows through that domain's api.py, whose repository
  runs the SQL, so the innermost domain frame is the owner's.
- A transaction ended outside its unit of work, however it ends. On every engine (class-level events: the
  primary's, the replica's, any other) a unit of work's transaction is committed only in `UnitOfWork.commit`
  (the pipeline's Commit stage) and rolled back only by the unit of work; any other ends only in jobs,
  commands, module.py and the kernel's own paths (migrations, the task runner, the audit log, `read_apart`). At
  the driver, every COMMIT/ROLLBACK psycopg sends itself (`commit()`, `rollback()`, a `transaction()` block's
  end, two-phase; blocking or asyncio) not under SQLAlchemy is a domain's only on a connection of its own (a
  job's), never beneath SQLAlchemy's pool; no domain sends COMMIT/ROLLBACK as SQL; and a write on a connection
  in autocommit (a read's: the replica's, a read-only unit of work's) is a transaction ending itself, refused
  but in those same files.
- Network from a service or repository (an audit hook on `socket.connect` and `socket.getaddrinfo`, and
  psycopg's connect, whose libpq socket the hook never sees): the innermost frame of the package must not be a
  file named `service`/`repository`; network happens in client code (the kernel's Redis and object store, the
  providers, a domain's client file: files/s3.py, billing/stripe_processor.py, webhooks/http.py) and its
  database connection comes from its unit of work. No domain makes an engine or pool of its own (SQLAlchemy's
  `Engine`, psycopg_pool's): the kernel's engines own the connections.
- Redis from a domain (every command a redis-py connection sends, blocking or asyncio: `execute_command`,
  pipelines, pub/sub; and a client or pool a domain makes): the innermost frame of the package must be the
  kernel's (a capability: hints, the limiter, runs), never a domain's.

Declared exceptions: `DECLARED`, (domain, table) -> why, lets a domain touch a table it does not own,
a table's own `tables.py` declaring it `written_on_reads(why)` lets its domain write it on a read's connection,
and `PORTS` names kernel code that runs statements an owner handed it (checked where they are handed over). Each
check raises `BoundaryViolation` (an AssertionError: a 500 the suite sees; a background job logs it, and the
test stack's end fails on the log line). Attributing a frame is cached per code object, a statement's tables
and whether it writes per SQL string. It reads frames only to refuse, never to decide what a call does.
Unseen: libpq's own calls on `pgconn` (C, below psycopg), and what a thread of a library's own does.
"""

from __future__ import annotations

import functools
import pathlib
import re
import sys
import tomllib
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, cast

from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import Pool
from sqlalchemy.sql import ClauseElement

from persona_service.kernel.data.base import WRITTEN_ON_READS, Base
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
    """The innermost frame's place that is not a library's (a pool checkout, every Redis command: inline)."""
    places, frame = _PLACES, start
    while frame is not None:
        place = places.get(id(frame.f_code)) or _place(frame.f_code)
        if place.domain is not None:
            return place
        frame = frame.f_back
    return None


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
_ENDS_COMMAND = re.compile(_ENDS_SQL.pattern.encode(), re.IGNORECASE)  # what psycopg itself sends (bytes)
_ROLLS_BACK = re.compile(rb"^\s*(?:ROLLBACK|ABORT)\b", re.IGNORECASE)
_UOW = "boundaries.unit_of_work"  # conn.info: this transaction is a unit of work's
_UOW_OPENS = UnitOfWork.conn.fget.__code__  # type: ignore[attr-defined]
_UOW_COMMITS = UnitOfWork.commit.__code__
_SQLALCHEMY = "/sqlalchemy/"
# Statements that change something (the first word, or a DML word anywhere: a CTE's); `FOR UPDATE`, `FOR NO KEY
# UPDATE` and a foreign key's `ON DELETE` are not writes. COPY writes unless it copies TO.
_WRITE_WORDS = frozenset({"insert", "update", "delete", "merge", "truncate"})
_WRITES_FIRST = frozenset({"create", "alter", "drop", "grant", "revoke", "comment", "refresh", "reindex", "cluster",
                           "vacuum", "security", "do", "call"})
_NOT_A_WRITE_AFTER = frozenset({"for", "key", "on"})


def _writes(sql: str) -> bool:
    """Whether `sql` changes something (a write's or DDL's words, read as `_named_tables` reads names)."""
    words = [bare.lower() for _, bare, _ in _TOKEN.findall(_LITERAL.sub("''", sql)) if bare]
    if not words:
        return False
    if words[0] in _WRITES_FIRST or (words[0] == "copy" and "to" not in words):
        return True
    return any(word in _WRITE_WORDS and (i == 0 or words[i - 1] not in _NOT_A_WRITE_AFTER)
               for i, word in enumerate(words))


class Tables:
    """Each table's owner, and the tables a statement names and whether it writes (cached per SQL string)."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}
        self._named: dict[str, frozenset[str]] = {}
        self._writes: dict[str, bool] = {}

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

    def writes(self, sql: str) -> bool:
        found = self._writes.get(sql)
        if found is None:
            if len(self._writes) >= _CACHED_STATEMENTS:
                self._writes.clear()
            found = self._writes[sql] = _writes(sql)
        return found


_TABLES = Tables()


def check_sql(sql: str, start: FrameType | None, driver: Any = None) -> None:
    """Raise when the domain whose code sent `sql` (the innermost domain frame from `start`) names another
    domain's table but as `DECLARED`, or ends the transaction in SQL, or (on `driver`, the psycopg connection it
    runs on) writes in autocommit, a transaction that ends itself, from a file that may end none."""
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
    if driver is not None and driver.autocommit and _TABLES.writes(sql):
        writer = _writer(start)
        if (writer is not None and writer.in_domain and writer.role not in _ENDS_TRANSACTIONS
                and not _declared_write(writer, sql)):
            raise BoundaryViolation(
                f"{writer} ({writer.role or 'no role'}) wrote on a connection in autocommit (a read's: the replica's "
                f"or a read-only unit of work's), a transaction that ends outside any unit of work: {sql[:160]}")


def _declared_write(writer: Place, sql: str) -> bool:
    """Whether every table the statement names is the writer's own and declared written on reads by its
    `tables.py` (`written_on_reads`: the declaration sits with the table, so the kernel names no domain)."""
    named = _TABLES.named(sql)
    owners = _TABLES.owners()
    tables = Base.metadata.tables
    return bool(named) and all(owners.get(table) == writer.domain and table in tables
                               and WRITTEN_ON_READS in tables[table].info for table in named)


# The kernel's runners of their caller's statements (`Prepared`…): a write they run is their caller's.
_RUNS_CALLERS_SQL = "/kernel/data/prepared.py"


def _writer(start: FrameType | None) -> Place | None:
    """Who wrote: the innermost frame of the package past the statement runners (the kernel's own autocommit
    writes, the outbox's, are the kernel's, whoever called the capability)."""
    for code in _codes(start):
        if not code.co_filename.endswith(_RUNS_CALLERS_SQL):
            place = _place(code)
            if place.domain is not None:
                return place
    return None


def check_commit(conn: Connection, start: FrameType | None) -> None:
    """Raise when a domain's code commits: a unit of work's transaction but in `UnitOfWork.commit`, any other
    but in a job, a command or module.py. The committer is the innermost frame of the package: the kernel's
    own transactions (the audit log a provider's retry writes, a task's claim) end in the kernel, whoever
    called the capability, and code outside the package (a test) is not checked."""
    place = _innermost_of_package(start)
    if place is None or not place.in_domain:
        return
    if conn.info.get(_UOW):
        frame = start
        while frame is not None and frame.f_code is not _UOW_COMMITS:
            frame = frame.f_back
        if frame is None:
            raise BoundaryViolation(f"{place} committed a unit of work's transaction (only UnitOfWork.commit, "
                                    "the pipeline's Commit stage, does)")
    elif place.role not in _ENDS_TRANSACTIONS:
        raise BoundaryViolation(f"{place} ({place.role or 'no role'}) committed a transaction: only jobs, "
                                "commands and module.py end one (a call's ends in its unit of work)")


def check_rollback(conn: Connection, start: FrameType | None) -> None:
    """A unit of work's transaction is rolled back by the unit of work (the pipeline's, when the call fails),
    never by a domain's code: what ran before would be lost and the rest commit alone."""
    if conn.info.get(_UOW):
        place = _innermost_of_package(start)
        if place is not None and place.in_domain:
            raise BoundaryViolation(f"{place} rolled back a unit of work's transaction (the unit of work ends it)")


# The driver connections SQLAlchemy's pools hand out (marked at each checkout): theirs to end.
_POOLED: weakref.WeakSet[Any] = weakref.WeakSet()


def check_driver_end(driver: Any, command: bytes, start: FrameType | None) -> None:
    """A transaction ended at the driver, however reached (psycopg's `commit()`/`rollback()`, a `transaction()`
    block's end, two-phase, blocking or asyncio: each sends its command here). Through SQLAlchemy, its events
    judge it (`check_commit`); otherwise the innermost frame of the package ends it: a domain's, on a connection
    SQLAlchemy pools, is refused (beneath it), and on a connection of its own it commits as `check_commit` allows."""
    for code in _codes(start):
        if _SQLALCHEMY in code.co_filename:
            return
        place = _place(code)
        if place.domain is not None:
            break
    else:
        return
    if not place.in_domain:
        return
    rolls_back = bool(_ROLLS_BACK.match(command))
    if driver in _POOLED:
        verb = "rolled back" if rolls_back else "committed"
        raise BoundaryViolation(f"{place} {verb} the driver's connection beneath SQLAlchemy ({command[:40]!r}): "
                                "the unit of work, or the job's `engine.begin()`, ends its transaction")
    if not rolls_back and place.role not in _ENDS_TRANSACTIONS:
        raise BoundaryViolation(f"{place} ({place.role or 'no role'}) committed a transaction: only jobs, "
                                "commands and module.py end one (a call's ends in its unit of work)")


def check_network(start: FrameType | None, what: str = "a network connection") -> None:
    place = _innermost_of_package(start)
    if place is not None and place.named in _NO_NETWORK:
        raise BoundaryViolation(f"{place} opened {what}: a {place.named} calls the kernel's clients (or its "
                                "domain's client file) and is handed its connection by the unit of work, never "
                                "the network")


def check_engine(start: FrameType | None) -> None:
    """An engine or pool connects later, from whoever takes a connection: it is refused where a domain makes it
    (the kernel's engines own the connections; a domain's come from its unit of work, or a job's engine)."""
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} made a database engine or pool of its own: connections are the "
                                "kernel's engine's (the unit of work hands them)")


def check_redis(start: FrameType | None, what: str = "sent a Redis command") -> None:
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} {what} itself: a domain reaches Redis through a kernel capability (its "
                                "door, kernel/api.py)")


# --- where the checks are installed ------------------------------------------------------------


def _begin(conn: Connection) -> None:
    if _state["on"]:
        frame: FrameType | None = _caller()
        while frame is not None and frame.f_code is not _UOW_OPENS:  # (every transaction's whole stack: inline)
            frame = frame.f_back
        conn.info[_UOW] = frame is not None


def _end(conn: Connection) -> None:
    if not conn.invalidated:
        conn.info.pop(_UOW, None)


def _commit(conn: Connection) -> None:
    if _state["on"]:
        check_commit(conn, _caller())
    _end(conn)


def _rollback(conn: Connection) -> None:
    if _state["on"] and not conn.invalidated:  # (an invalidated connection's info would reconnect: it refuses)
        check_rollback(conn, _caller())
    _end(conn)


def _checkout(driver: Any, record: Any, proxy: Any) -> None:
    """A connection taken from any engine's pool: SQLAlchemy's to end, and never a service's or repository's own
    (the unit of work takes it, in the kernel)."""
    if _state["on"]:
        _POOLED.add(driver)
        check_network(sys._getframe(1), "a database connection")


class BoundaryGuard:
    """The guard in this process (`install_process`): its checks watch every engine, the replica's and any other
    as the primary's, so `install` names one only for its callers' sake."""

    def install(self, engine: Engine) -> None:
        install_process()


_NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo"}
_state = {"installed": False, "on": False}


def _audit(name: str, args: tuple[Any, ...]) -> None:
    if name in _NETWORK_EVENTS and _state["on"]:
        check_network(sys._getframe(1))


_Check = Callable[[Any, tuple[Any, ...], FrameType], None]


def _checked(method: Callable[..., Any], check: _Check) -> Callable[..., Any]:
    """`method`, running `check(self, its arguments, its caller's frame)` first while the guard is on (for a
    coroutine function too: the check runs where it is called, in its awaiting caller's frames)."""
    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _state["on"]:
            check(self, args, sys._getframe(1))
        return method(self, *args, **kwargs)
    return guarded


def _sql_of(cursor: Any, args: tuple[Any, ...], start: FrameType) -> None:
    query = args[0] if args else ""
    check_sql(query.decode() if isinstance(query, bytes) else str(query), start, cursor.connection)


def _command_of(driver: Any, args: tuple[Any, ...], start: FrameType) -> None:
    """psycopg's `_exec_command`: the commands it sends itself (BEGIN, COMMIT, ROLLBACK, SAVEPOINT…)."""
    command = args[0]
    if not isinstance(command, bytes):
        command = command.encode() if isinstance(command, str) else command.as_bytes(driver)  # (a Composable)
    if _ENDS_COMMAND.match(command):
        check_driver_end(driver, command, start)


def _only(check: Callable[..., None], *what: str) -> _Check:
    """A check that reads the caller's frame only."""
    return lambda _, __, start: check(start, *what)


def install_process() -> None:
    """Turn the SQL, transaction, connection, network and Redis checks on in this process, on every engine and
    driver connection (the hooks stay: Python cannot remove an audit hook, so `guarding(False)` turns them off)."""
    if not _state["installed"]:
        import psycopg
        import psycopg_pool
        import redis.asyncio.client
        import redis.asyncio.connection
        import redis.client
        import redis.connection

        sys.addaudithook(_audit)
        for name, listener in (("begin", _begin), ("commit", _commit), ("rollback", _rollback)):
            event.listen(Engine, name, listener)  # every engine's, made before or after
        event.listen(Pool, "checkout", _checkout)
        hooks: list[tuple[type, str, _Check]] = [
            *((cls, name, _sql_of) for cls in (psycopg.Cursor, psycopg.ServerCursor, psycopg.AsyncCursor,
                                                 psycopg.AsyncServerCursor)
              for name in ("execute", "executemany", "stream", "copy")),
            (psycopg.BaseConnection, "_exec_command", _command_of),
            # A connection psycopg makes (libpq opens its socket in C, past the audit hook), blocking or asyncio.
            (psycopg.BaseConnection, "_connect_gen", _only(check_network, "a database connection")),
            # (create_engine's last step; Engine.__init__ is not wrapped: create_engine reads its parameters)
            (Dialect, "engine_created", _only(check_engine)),
            (psycopg_pool.base.BasePool, "__init__", _only(check_engine)),
            # Every command, and the connection it opens first (asyncio's pool connects before sending, in a
            # `try` that turns an exception into its own ConnectionError).
            *((cls, name, _only(check_redis))
              for cls in (redis.connection.AbstractConnection, redis.asyncio.connection.AbstractConnection)
              for name in ("send_packed_command", "connect_check_health")),
            *((cls, "__init__", _only(check_redis, "made a Redis client"))
              for cls in (redis.client.Redis, redis.asyncio.client.Redis, redis.connection.ConnectionPool,
                          redis.asyncio.connection.ConnectionPool)),
        ]
        server_cursors = (psycopg.ServerCursor, psycopg.AsyncServerCursor)
        for cls, name, check in hooks:
            method = vars(cls).get(name)
            if isinstance(method, classmethod):
                setattr(cls, name, classmethod(_checked(method.__func__, check)))
            elif method is not None:
                setattr(cls, name, _checked(method, check))
            elif cls not in server_cursors:  # (they override some of a cursor's methods only)
                # A library renamed what the guard wraps (psycopg's private `_exec_command`…): not silently blind.
                raise RuntimeError(f"the boundary guard cannot watch {cls.__module__}.{cls.__qualname__}.{name}")
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
