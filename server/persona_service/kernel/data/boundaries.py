"""The boundary guard: the layout's rules checked on what runs, not on how it is spelt.

tests/test_architecture.py and lint-imports read the source, so they catch the spellings they were written
for (a reviewer planted 27 violations and 19 passed them: issue 47). This guard, on in every test stack
(`PERSONA_BOUNDARY_GUARD=1`, off by default), watches what the capabilities beneath a domain do (the driver,
every engine, the sockets, redis-py) and finds who did it by the Python stack (the innermost frame of a domain's
code, `persona_service/<domain>/…`; kernel, providers and third-party frames are skipped):

- SQL naming another domain's tables: the tables each statement the driver is handed names (psycopg's
  cursors, blocking and asyncio, below SQLAlchemy's `before_cursor_execute`, so `Prepared` reads and a driver
  connection used directly count too; a `psycopg.sql` composition as the SQL it makes), against the owner of
  each, the module whose tables.py declares it; the kernel's tables are everyone's. The SQL is read as
  PostgreSQL's lexer reads it (`lex`: nested comments, `E'…'`, dollar quotes, `U&"…"` identifiers, several
  statements), and a string's text as SQL too (a `DO` body's `EXECUTE '…'`); and no domain has the database
  run a program (`COPY … PROGRAM`), read or write its server's files (`COPY … TO '/file'`) or call a function
  PostgreSQL keeps from PUBLIC (`pg_read_file`…). Behind the names a statement spells, what the database runs is
  read from its catalogue (`Catalog`): a view's or rule's query (pg_depend), a function's body (and a
  `BEGIN ATOMIC` one's dependencies), the triggers and rules a write on a domain's table fires, a partition's
  parent; each table reached there is judged as if named. Where the database builds the SQL it runs (a `DO`
  block, a function whose body `EXECUTE`s, `ts_stat`'s query), PostgreSQL's own counts of what the transaction
  touched (pg_stat_xact_user_tables, before and after the statement, on a blocking connection in a transaction)
  say which tables it reached; where they cannot (autocommit, asyncio, a pipeline) such a statement is refused
  (but a migration's in an autocommit block: its SQL is judged as written, as its catalogue is).
  The built-ins that run a query are the catalogue's (an argument that is a query's text or a refcursor, the XML
  family: `table_to_xml` on a name built at run time, `database_to_xml`) beside `ts_stat`/`ts_rewrite`; the
  catalogue covers the session's temporary objects (pg_temp) and is read again after a domain's DDL has run.
  What a statement runs by name (`EXECUTE name` wherever it stands: `EXPLAIN EXECUTE`, `CREATE TABLE … AS
  EXECUTE`; `FETCH`/`MOVE` from a cursor) is what the session stored under it (pg_prepared_statements,
  pg_cursors, whichever domain stored it), judged as if sent. libpq's own connection (`pgconn`, wherever psycopg
  holds it, and its socket, `fileno()`) is never a domain's to take: SQL sent there passes every cursor. It is
  read from a domain's frame only to be refused, psycopg sending or not (a domain's dumper or notice handler runs
  inside the send), is held beside psycopg's objects, not in their dicts (`vars(driver)` holds none), and the
  collector's views of every object (`gc.get_referents`, `get_referrers`, `get_objects`) are no domain's. A domain reads another's rows through that domain's api.py, whose
  repository runs the SQL, so the innermost domain frame is the owner's; and that owner's code must have been
  entered through its door: from the innermost domain frame out to the first frame of the package not the
  owner's, another domain's code there must have called what the owner's api.py exports (or a port its
  module.py declares; the kernel between them is a door too), not its repository reached through an object.
- A connection taken from any engine's pool by a domain's file that is not a job, command, module.py or migration
  (a repository's `self._conn.engine.connect()`: a read outside its call's unit of work); the unit of work and
  `read_apart` take theirs in the kernel.
- A statement on a table sent by a domain file that is not where SQL lives: the innermost frame of the package at
  the driver is a domain's repository, tables or migration, or the kernel (its helpers a service calls, the
  outbox's, a lock's, send their own), never a service, servicer, job or helper running one itself, whoever
  built it (its own repository's statement run by a service included) and however (SQLAlchemy, the driver's
  cursor, an alias of `execute`). A statement naming no table and writing nothing (the pool's `SELECT 1`, the
  dialect's first-connect queries, a lock by name) is not judged.
- A transaction ended outside its unit of work, however it ends. On every engine (class-level events: the
  primary's, the replica's, any other) a unit of work's transaction is committed only in `UnitOfWork.commit`
  (the pipeline's Commit stage) and rolled back only by the unit of work, nor its connection closed or
  invalidated by a domain while the transaction is open; any other ends only in jobs, commands, module.py and
  the kernel's own paths (migrations, the task runner, the audit log, `read_apart`). At the driver, every
  COMMIT/ROLLBACK psycopg sends itself (`commit()`, `rollback()`, a `transaction()` block's end, two-phase;
  blocking or asyncio) and every `close()` not under SQLAlchemy is a domain's only on a connection of its own
  (a job's), never beneath SQLAlchemy's pool; no domain sends COMMIT/ROLLBACK as SQL (in any of a string's
  statements, after any comment); and a write on a connection in autocommit (a read's: the replica's, a
  read-only unit of work's) is a transaction ending itself, refused but in those same files. A transaction
  begun on a unit of work's connection after it ended its own (a repository's generator drained past the commit)
  is a domain's statement outside its unit of work.
- Network from a service or repository (an audit hook on every socket event that reaches out: connect, a
  datagram, bind, a name looked up; a process started (multiprocessing's spawn too: `_posixsubprocess.fork_exec`)
  or native code loaded (ctypes), which may reach anything; psycopg's connect, whose
  libpq socket the hook never sees; a gRPC channel made, whose core's are C's too): the innermost frame of the package must not be a file named
  `service`/`repository`, nor, past it, a repository of the same domain (a repository's helper is the
  repository's: it holds its unit of work's connection while it waits). A service calling its domain's client
  file is the layout's way (files/s3.py, billing/stripe_processor.py, webhooks/http.py), so only the innermost
  frame judges a service; its database connection comes from its unit of work. No domain makes an engine or
  pool of its own (SQLAlchemy's `Engine`, psycopg_pool's): the kernel's engines own the connections.
- Redis from a domain (every command a redis-py connection sends, blocking or asyncio: `execute_command`,
  pipelines, pub/sub, scripts; a client or pool a domain makes; and a socket of its own to an address redis-py
  connected to, however spelt: a Unix socket's real path, a local port): the innermost frame of the package must
  be the kernel's (a capability: hints, the limiter,
  runs), never a domain's.

Threads and the event loop: work handed over (`Thread(target=…)`, a `Timer`, `_thread.start_new_thread`, an
executor's `submit`, `asyncio.to_thread`, `run_in_executor`; from a domain's code, every callback the loop runs,
a Handle's: `call_soon`/`call_later`/`call_at`, `add_reader`/`add_writer`, `add_signal_handler`; and
`loop.create_task`; and work run later, a `weakref.finalize` callback, a signal's handler, an `atexit` callback, a
log handler a domain made whose `emit` is a library's: a SocketHandler's) whose callable is not
the package's runs in a carrier whose frame holds its hander's stack,
spliced in wherever a walk meets it: `Thread(target=conn.exec_driver_sql)` is its starter's SQL. A callable of the
package's is judged by its own frames (a kernel worker's thread is the kernel's, whoever first started it). The
guard's own frames (its wrappers, between a domain and what it calls) are no one's: a walk passes them.

Declared exceptions: `DECLARED`, (domain, table) -> why, lets a domain touch a table it does not own,
and `PORTS` names kernel code that runs statements an owner handed it (checked where they are handed over). Each
check raises `BoundaryViolation` (an AssertionError: a 500 the suite sees; a background job logs it, and the
test stack's end fails on the log line). Attributing a frame is cached per code object, a statement's tables,
whether it writes and how it escapes its unit of work per SQL string. It reads frames only to refuse, never to
decide what a call does.
Unseen: a libpq connection a domain makes itself (`psycopg.pq.PGconn.connect`: C, no audit event on 3.11, and its
type is reached past any module attribute, `object.__subclasses__()`; 3.12's `sys.monitoring` CALL events on
domain code would see it; statically, no domain imports psycopg, psycopg_binary, ctypes or gc), another domain's
internals entered past its api.py for anything but SQL (the door's walk runs with each statement), C code's own
sockets but libpq's connect and a gRPC channel's, a service or repository reaching the network through a kernel
capability (the capability answers for itself), a built-in running a query the catalogue does not describe (an
unnamed argument's but `ts_rewrite`'s, an extension's), the catalogue as it was on an asyncio connection (it is
read only on a blocking one), a NOTIFY channel or an advisory lock named for another domain (the layout gives them
no owner), a library's callable appended to `gc.callbacks` (it runs from whichever frame collects), and a library's
own thread or callback started from no frame of a domain.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import os
import pathlib
import re
import sys
import threading
import tomllib
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import Connection, Engine, Executable, event
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import Pool
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
# Who in a domain sends a statement that reads or writes a table (the innermost frame of the package at the driver;
# the kernel's helpers that a service calls, the outbox's or a lock's, send their own): the files whose role holds
# its SQL. A statement naming no table and writing nothing (the pool's `SELECT 1`, the dialect's first-connect
# queries when a job's engine.begin() connects, a lock by name) is not judged here.
_SENDS_SQL = frozenset({"repository", "tables", "migrations"})
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
    if filename == __file__:  # the guard's own wrappers stand between a domain and what it calls: transparent
        return _OUTSIDE
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


# --- threads and callbacks: whose work it is -------------------------------------------------

# Work handed over to another thread (a thread started, work submitted to an executor: `asyncio.to_thread`,
# `run_in_executor`) or to the event loop (a callback, a task) whose callable is not the package's
# (`Thread(target=conn.execute)`, `pool.submit(socket.create_connection, …)`, `loop.call_soon(conn.execute, …)`)
# runs inside a carrier of the guard's own, whose frame holds the stack (code objects) of the code that handed it
# over: its own frames hold none of the package's, so without it nobody would have done what it does. Walking a
# stack splices that origin in where the carrier stands (no ambient state: the stack says it). A callable of the
# package's (a kernel's worker, a domain's function) is attributed by its own frames, as any call.
_CARRIER = Place(None, "carrier")


def _codes(start: FrameType | None) -> Iterator[CodeType]:
    """The codes of `start`'s stack, innermost first, a carrier's origin spliced in where it stands."""
    for frame, _ in traceback.walk_stack(start):
        if _PLACES.get(id(frame.f_code)) is _CARRIER:
            yield from frame.f_locals["codes"]
        else:
            yield frame.f_code


def _the_packages(work: Any) -> bool:
    """Whether `work` (a thread's target or run, an executor's callable, a callback, a coroutine) is the
    package's code (its frames then say whose it is)."""
    while isinstance(work, functools.partial):
        work = work.func
    work = getattr(work, "__func__", work)
    code = getattr(work, "__code__", None) or getattr(work, "cr_code", None)
    return code is not None and _place(code).domain is not None


def _carrying(work: Callable[..., Any], codes: tuple[CodeType, ...]) -> Callable[..., Any]:
    """`work`, run under a carrier of `codes`, its origin."""
    def carried(*args: Any, **kwargs: Any) -> Any:
        codes  # noqa: B018 - a free variable of this frame, so the walk (`_codes`) finds it in its locals
        return work(*args, **kwargs)
    return carried


async def _carried(coroutine: Any, codes: tuple[CodeType, ...]) -> Any:
    """`coroutine`, awaited under a carrier of `codes`, its origin."""
    return await coroutine


for _code in (_carrying(print, ()).__code__, _carried.__code__):
    _PLACES[id(_code)] = _CARRIER
    _SEEN.append(_code)


def _starting(thread: threading.Thread, args: tuple[Any, ...], start: FrameType) -> None:
    run = thread.run
    work = getattr(thread, "_target", None) if getattr(run, "__func__", None) is threading.Thread.run else run
    if work is not None and not _the_packages(work):
        thread.run = _carrying(run, tuple(_codes(start)))  # type: ignore[method-assign]


def _handing_over(method: Callable[..., Any], at: int = 0, coroutine: bool = False,
                  anywhere: bool = False) -> Callable[..., Any]:
    """`method` (an executor's `submit`, a loop's `call_soon`…, `create_task`), carrying its caller's stack to
    the callable (or coroutine) at argument `at` when it is not the package's. An executor's from anywhere; a
    loop's only when a domain's frame is the innermost of the package (the loop's own callbacks are many)."""
    @functools.wraps(method)
    def handing_over(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _state["on"] and len(args) > at and (coroutine or callable(args[at])) and not _the_packages(args[at]):
            start = sys._getframe(1)
            if anywhere or (_innermost_of_package(start) or _KERNEL).in_domain:
                codes = tuple(_codes(start))
                work = _carried(args[at], codes) if coroutine else _carrying(args[at], codes)
                args = (*args[:at], work, *args[at + 1:])
        return method(self, *args, **kwargs)
    return handing_over


_MAKER = "_boundaries_maker"  # a log handler's attribute: the stack of the domain's code that made it


def _made(init: Callable[..., Any]) -> Callable[..., Any]:
    """`logging.Handler.__init__`, keeping its maker's stack when a domain's code makes a handler whose `emit` is
    not the package's (it runs later, from whoever logs)."""
    @functools.wraps(init)
    def making(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if _state["on"] and not _the_packages(type(self).emit):
            start = sys._getframe(1)
            if (_innermost_of_package(start) or _KERNEL).in_domain:
                self.__dict__[_MAKER] = tuple(_codes(start))
    return making


def _handled(handle: Callable[..., Any]) -> Callable[..., Any]:
    """`logging.Handler.handle`, run under a carrier of its maker's stack when a domain's code made it (`_made`)."""
    @functools.wraps(handle)
    def handling(self: Any, record: Any) -> Any:
        codes = self.__dict__.get(_MAKER)
        return handle(self, record) if codes is None else _carrying(handle, codes)(self, record)
    return handling


def _caller() -> FrameType:
    return sys._getframe(2)  # the frame that called the function calling this one


def _innermost_domain(start: FrameType | None) -> tuple[Place, FrameType | None] | None:
    """The innermost domain frame's place and frame (None when it is in a carrier's origin: no frame); None when
    there is none, or a declared port (`PORTS`) comes first."""
    places, ports = _PLACES, PORTS
    for frame, _ in traceback.walk_stack(start):  # (the hot loop: a statement's stack, inline)
        key = id(frame.f_code)
        if key in ports:
            return None
        place = places.get(key) or _place(frame.f_code)
        if place.domain:
            return place, frame
        if place is _CARRIER:
            for code in _codes(frame):
                if id(code) in ports:
                    return None
                if _place(code).domain:
                    return _place(code), None
            return None
    return None


def _innermost_of_package(start: FrameType | None) -> Place | None:
    """The innermost frame's place that is not a library's (a pool checkout, every Redis command: inline)."""
    places, frame = _PLACES, start
    while frame is not None:
        place = places.get(id(frame.f_code)) or _place(frame.f_code)
        if place.domain is not None:
            return place
        if place is _CARRIER:
            return next((p for p in map(_place, _codes(frame)) if p.domain is not None), None)
        frame = frame.f_back
    return None


# --- tables -------------------------------------------------------------------------------

_SCHEMA = "public"
_CACHED_STATEMENTS = 20_000  # distinct SQL strings kept (a server sends a few hundred)
_NESTED = 2  # how deep a string's own SQL is read (a `DO` body's `EXECUTE '…'`)


@dataclass(frozen=True)
class Lexeme:
    """One of PostgreSQL's tokens, as its lexer reads them: `name` (a bare word lower-cased, or a quoted or
    `U&"…"` identifier as written), `string` (a literal's, an `E'…'`'s or a `$tag$…$tag$` body's text), `.`,
    `;` or any other character (`other`); whitespace and comments are dropped."""

    kind: str
    text: str
    bare: bool = False


_LEXEME = re.compile(r"""
    (?P<space>\s+) | (?P<line>--[^\n]*) | (?P<block>/\*)
  | (?P<escaped>[Ee]'(?:[^'\\]|\\.|'')*'?)
  | (?P<uident>[Uu]&"(?:[^"]|"")*"?) | (?P<ustring>[Uu]&'(?:[^']|'')*'?)
  | (?P<string>'(?:[^']|'')*'?)
  | (?P<dollar>\$(?:[^\W\d]\w*)?\$)
  | (?P<quoted>"(?:[^"]|"")*"?)
  | (?P<word>[^\W\d][\w$]*)
  | (?P<number>\$?\d[\w.]*)
  | (?P<dot>\.) | (?P<semi>;) | (?P<other>.)""", re.VERBOSE | re.DOTALL)
_UESCAPE = re.compile(r"""\s*UESCAPE\s*'(.)'""", re.IGNORECASE | re.DOTALL)
_BACKSLASHED = re.compile(r"\\(.)", re.DOTALL)


def _unicode_escapes(text: str, escape: str) -> str:
    """A `U&"…"` identifier's or `U&'…'` string's text: `\\XXXX`, `\\+XXXXXX` and a doubled escape character."""
    e = re.escape(escape)
    pattern = re.compile(rf"{e}(?:{e}|\+([0-9A-Fa-f]{{6}})|([0-9A-Fa-f]{{4}}))")
    return pattern.sub(lambda m: escape if m.group(0) == escape * 2 else chr(int(m.group(1) or m.group(2), 16)), text)


def lex(sql: str) -> list[Lexeme]:
    """`sql`'s tokens as PostgreSQL reads them (comments nest; standard-conforming strings; a quote in a comment,
    an `E'\\''` or a dollar-quoted body does not start a string), so what the guard judges is what the server
    runs, however it is spelt."""
    found: list[Lexeme] = []
    at, end = 0, len(sql)
    while at < end:
        match = cast(re.Match[str], _LEXEME.match(sql, at))
        kind, text, at = cast(str, match.lastgroup), match.group(), match.end()
        if kind in ("space", "line"):
            continue
        if kind == "block":
            depth = 1
            while depth and at < end:
                opens, closes = sql.find("/*", at), sql.find("*/", at)
                if closes < 0:
                    at = end
                elif 0 <= opens < closes:
                    depth, at = depth + 1, opens + 2
                else:
                    depth, at = depth - 1, closes + 2
            continue
        if kind == "dollar":
            closes = sql.find(text, at)
            body, at = (sql[at:], end) if closes < 0 else (sql[at:closes], closes + len(text))
            found.append(Lexeme("string", body))
        elif kind in ("uident", "ustring"):
            escape = _UESCAPE.match(sql, at)
            if escape:
                at = escape.end()
            quote = text[2]
            body = text[3:-1 if text.endswith(quote) and len(text) > 3 else None].replace(quote * 2, quote)
            found.append(Lexeme("name" if kind == "uident" else "string",
                                _unicode_escapes(body, escape.group(1) if escape else "\\")))
        elif kind == "escaped":
            found.append(Lexeme("string", _BACKSLASHED.sub(r"\1", text[2:-1]).replace("''", "'")))
        elif kind == "string":
            found.append(Lexeme("string", text[1:-1].replace("''", "'")))
        elif kind == "quoted":
            found.append(Lexeme("name", text[1:-1].replace('""', '"')))
        elif kind == "word":
            found.append(Lexeme("name", text.lower(), bare=True))
        elif kind in ("dot", "semi"):
            found.append(Lexeme(text, text))
        else:
            found.append(Lexeme("other", text))
    return found


def _named_tables(sql: str, tables: frozenset[str], depth: int = 0) -> frozenset[str]:
    """The names of `tables` that `sql` uses as tables: bare, quoted or schema-qualified, wherever they stand
    (a subquery, a CTE, a join, several statements); a name after another's dot (`alias.column`) is a column,
    `public.x` a table, and a foreign key's target in DDL (`REFERENCES organizations`) is named, not touched. A
    string's text is read as SQL too (`EXECUTE '…'` in a `DO` body, `format('%I', 'x')`, a function running a
    query it is given): a domain writes no other domain's table name, in any spelling the server may run."""
    found: set[str] = set()
    before = ["", ""]  # the two name or dot tokens before this one
    for lexeme in lex(sql):
        if lexeme.kind == "string":
            if depth < _NESTED:
                found |= _named_tables(lexeme.text, tables, depth + 1)
            continue
        if lexeme.kind not in ("name", "."):
            continue
        token = lexeme.text
        qualified = before[1] == "." and before[0] != _SCHEMA
        if lexeme.kind == "name" and token in tables and not qualified and "references" not in before:
            found.add(token)
        before = [before[1], token]
    return frozenset(found)


_ENDS_WORDS = {"commit", "end", "abort", "rollback"}
_ENDS = "ended a transaction in SQL (the unit of work commits)"
_RUNS_A_PROGRAM = "had the database run a program (COPY … PROGRAM: the server's shell, and its network)"
_SERVER_FILE = "had the database read or write a file of its server's (COPY … TO/FROM a file name)"
_PRIVILEGED = "called a function PostgreSQL keeps from PUBLIC (the server's files, processes or settings)"


def _escapes(sql: str) -> str:
    """How `sql` escapes its unit of work, or '': a statement that ends the transaction (COMMIT, END, ABORT,
    ROLLBACK but `ROLLBACK TO` a savepoint, PREPARE TRANSACTION, COMMIT/ROLLBACK PREPARED), in any of its
    statements, after any comment; or a `COPY … PROGRAM`, which runs a shell command on the database server, or a
    `COPY` to or from a file of its (not STDIN/STDOUT: the client's)."""
    words: list[str] = []
    statement: list[Lexeme] = []
    for lexeme in [*lex(sql), Lexeme(";", ";")]:
        if lexeme.kind != ";":
            words.append(lexeme.text if lexeme.bare else "")
            statement.append(lexeme)
            continue
        first, second = (words + ["", ""])[:2]
        if (first in _ENDS_WORDS and not (first == "rollback" and second == "to")) or \
                (first == "prepare" and second == "transaction"):
            return _ENDS
        if first == "copy" and "program" in words:
            return _RUNS_A_PROGRAM
        if first == "copy" and any(word in ("to", "from") and after.kind == "string"
                                   for word, after in zip(words, statement[1:], strict=False)):
            return _SERVER_FILE
        words, statement = [], []
    return ""


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

# What psycopg itself sends (simple commands, bytes); a statement's ends are read by `_ends`.
_ENDS_COMMAND = re.compile(rb"^\s*(?:COMMIT|END|ABORT|ROLLBACK(?!\s+TO\b)|PREPARE\s+TRANSACTION)\b", re.IGNORECASE)
_ROLLS_BACK = re.compile(rb"^\s*(?:ROLLBACK|ABORT)\b", re.IGNORECASE)
_TO_SAVEPOINT = re.compile(rb"^\s*ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\b", re.IGNORECASE)
_UOW = "boundaries.unit_of_work"  # conn.info: this transaction is a unit of work's
_HELD = "boundaries.held"  # conn.info: a unit of work holds this connection (until the pool has it back)
_UOW_OPENS = (UnitOfWork.conn.fget.__code__, UnitOfWork.begin_again.__code__)  # type: ignore[attr-defined]
_UOW_COMMITS = UnitOfWork.commit.__code__
_SQLALCHEMY = "/sqlalchemy/"
# Statements that change something (the first word, or a DML word anywhere: a CTE's); `FOR UPDATE`, `FOR NO KEY
# UPDATE` and a foreign key's `ON DELETE` are not writes. COPY writes unless it copies TO.
_WRITE_WORDS = frozenset({"insert", "update", "delete", "merge", "truncate"})
_WRITES_FIRST = frozenset({"create", "alter", "drop", "grant", "revoke", "comment", "refresh", "reindex", "cluster",
                           "vacuum", "security", "do", "call"})
_NOT_A_WRITE_AFTER = frozenset({"for", "key", "on"})


def _writes(sql: str) -> bool:
    """Whether `sql` changes something (a write's or DDL's words, as the server reads them: `lex`)."""
    words = [lexeme.text for lexeme in lex(sql) if lexeme.bare]
    if not words:
        return False
    if words[0] in _WRITES_FIRST or (words[0] == "copy" and "to" not in words):
        return True
    return any(word in _WRITE_WORDS and (i == 0 or words[i - 1] not in _NOT_A_WRITE_AFTER)
               for i, word in enumerate(words))


V = TypeVar("V")


class _PerStatement(Generic[V]):
    """What a function of a statement's SQL gives, kept per SQL string (at most `_CACHED_STATEMENTS` of them)."""

    def __init__(self, compute: Callable[[str], V]) -> None:
        self._compute = compute
        self._found: dict[str, V] = {}

    def __call__(self, sql: str) -> V:
        found = self._found.get(sql)
        if found is None:
            if len(self._found) >= _CACHED_STATEMENTS:
                self._found.clear()
            found = self._found[sql] = self._compute(sql)
        return found

    def clear(self) -> None:
        self._found.clear()


class Tables:
    """Each table's owner, and the tables a statement names, whether it writes and how it escapes its unit of
    work (cached per SQL string)."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}
        self.named = _PerStatement(lambda sql: _named_tables(sql, frozenset(self.owners())))
        self.writes = _PerStatement(_writes)
        self.escapes = _PerStatement(_escapes)
        self.ddl = _PerStatement(lambda sql: _ddl(sql))  # (defined with the catalogue, below)

    def owners(self) -> dict[str, str]:
        if len(self._owners) != len(Base.metadata.tables):  # modules imported since: read again
            self._owners = table_owners()
            self.named.clear()
        return self._owners


_TABLES = Tables()

# --- what the database runs on its side: views, rules, triggers, functions, partitions ----------------------

# A statement names a view, a partition or a function; the database then reads the tables behind it (a view's or
# rule's query, a trigger's or function's body, a partition's parent). PostgreSQL's catalogue says which: pg_depend
# records what each view, rule and `BEGIN ATOMIC` body reads; pg_inherits each partition's parent; pg_trigger the
# functions a write fires; a function's body (pg_proc.prosrc) is read as SQL, as a statement's strings are. Read
# on the statement's own connection (a migration's objects, not yet committed, included), again after the guard
# sees DDL, never by a migration's statement (its objects' bodies are judged where its SQL makes them).
_CATALOG_SQL = b"""
WITH rel AS (SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
               AND (n.nspname NOT LIKE 'pg\\_%' OR n.nspname LIKE 'pg\\_temp\\_%')),
     fn AS (SELECT p.oid, p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
              AND (n.nspname NOT LIKE 'pg\\_%' OR n.nspname LIKE 'pg\\_temp\\_%'))
SELECT CASE r.ev_type WHEN '1' THEN 'r' ELSE 'w' END, v.relname, coalesce(t.relname, f.proname), NULL
  FROM pg_rewrite r JOIN rel v ON v.oid = r.ev_class
  JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
  LEFT JOIN rel t ON d.refclassid = 'pg_class'::regclass AND t.oid = d.refobjid AND t.oid <> v.oid
  LEFT JOIN fn f ON d.refclassid = 'pg_proc'::regclass AND f.oid = d.refobjid
 WHERE coalesce(t.relname, f.proname) IS NOT NULL
UNION SELECT 'i', c.relname, p.relname, NULL FROM pg_inherits i JOIN rel c ON c.oid = i.inhrelid
  JOIN rel p ON p.oid = i.inhparent
UNION SELECT 'w', c.relname, f.proname, NULL FROM pg_trigger g JOIN rel c ON c.oid = g.tgrelid
  JOIN fn f ON f.oid = g.tgfoid WHERE NOT g.tgisinternal
UNION SELECT 'f', f.proname, coalesce(t.relname, g.proname), f.prosrc FROM fn f
  LEFT JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'n'
  LEFT JOIN rel t ON d.refclassid = 'pg_class'::regclass AND t.oid = d.refobjid
  LEFT JOIN fn g ON d.refclassid = 'pg_proc'::regclass AND g.oid = d.refobjid AND g.oid <> f.oid
UNION SELECT 'p', p.proname, NULL, NULL FROM pg_proc p
 WHERE p.pronamespace = 'pg_catalog'::regnamespace AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
UNION SELECT 'q', p.proname, NULL, NULL FROM pg_proc p
 WHERE p.pronamespace = 'pg_catalog'::regnamespace AND (p.proname LIKE '%\\_to\\_xml%'
    OR 'refcursor'::regtype::oid = ANY (p.proargtypes::oid[])
    OR EXISTS (SELECT FROM unnest(p.proargnames, coalesce(p.proargmodes, array_fill(
                   'i'::"char", ARRAY[coalesce(cardinality(p.proargnames), 0)]))) AS a(argument, mode)
                WHERE a.mode IN ('i', 'b', 'v') AND a.argument IN ('query', 'sqlquery')))
"""
_DDL_WORDS = frozenset({"create", "alter", "drop"})


def _ddl(sql: str) -> bool:
    return any(lexeme.bare and lexeme.text in _DDL_WORDS for lexeme in lex(sql)[:1])


@dataclass
class Catalog:
    """What each object of the database's (not a table of the metadata) reaches: a view, rule or partition the
    relations and functions it reads (`reads`), a table the functions its writes fire (`fires`), a function what
    its body and dependencies name (`calls`: it reaches them when called)."""

    reads: dict[str, set[str]]
    fires: dict[str, set[str]]
    calls: dict[str, set[str]]
    writing: set[str]  # functions whose body writes (their tables' triggers fire in turn)
    privileged: frozenset[str] = frozenset()  # the server's functions PUBLIC may not run (pg_read_file, lo_import…)
    dynamic: set[str] = field(default_factory=set)  # functions whose body runs SQL it builds (EXECUTE)
    # The server's functions that run a query they are handed or find (its text, a table or schema by name or oid,
    # a cursor): `query_to_xml`, `table_to_xml`, `database_to_xml`, `cursor_to_xml`, `ts_stat`…, by what the
    # catalogue says of their arguments, not by a list of names.
    runs_queries: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()  # (their parents in `reads`: what the stacks' jobs make and drop)

    @classmethod
    def of(cls, rows: list[tuple[str, str, str | None, str | None]], tables: frozenset[str]) -> Catalog:
        found = cls({}, {}, {}, set(), frozenset(name for kind, name, _, _ in rows if kind == "p"),
                    runs_queries=frozenset(name for kind, name, _, _ in rows if kind == "q"),
                    partitions=frozenset(name for kind, name, _, _ in rows if kind == "i"))
        for kind, name, reached, body in rows:
            if kind in ("p", "q"):
                continue
            into = {"r": found.reads, "i": found.reads, "w": found.fires, "f": found.calls}[kind]
            names = into.setdefault(name, set())
            if reached:
                names.add(reached)
            if body is not None and body.strip():  # (the body once per function: rows repeat it per dependency)
                if name not in found.writing and _writes(body):
                    found.writing.add(name)
                if any(lexeme.bare and lexeme.text == "execute" for lexeme in lex(body)):
                    found.dynamic.add(name)
        functions = frozenset(found.calls) | found.privileged
        relations = frozenset(found.reads) | tables
        for kind, name, _, body in rows:
            if kind == "f" and body:
                found.calls[name] |= _objects_named(body, relations, functions)
        return found

    def reached(self, sql: str, owners: dict[str, str]) -> frozenset[str]:
        """The tables of `owners` the database reads or writes for `sql` behind the objects it names, and the
        privileged functions it runs. A write fires the triggers and rules of a domain's table (its domain's code),
        not the kernel's (the events' fan-out is webhooks': a hook whose owner answers for its body, judged where
        its migration made it)."""
        if not (self.reads or self.fires or self.calls or self.privileged):
            return frozenset()
        tables = frozenset(owners)
        named = _objects_named(sql, frozenset(self.reads) | tables, frozenset(self.calls) | self.privileged)

        def fired(names: Iterator[str] | set[str]) -> list[str]:
            return [f for t in names if owners.get(t, KERNEL) != KERNEL for f in self.fires.get(t, ())]

        seen: set[str] = set()
        todo = [*named, *fired(named)] if _writes(sql) else [*named]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(self.reads.get(name, ()))
            todo.extend(self.calls.get(name, ()))
            if name in self.writing:  # a writing function fires its tables' triggers
                todo.extend(fired(self.calls.get(name, set())))
        return frozenset(seen & (tables | self.privileged)) - (named & tables)


    def runs_built_sql(self, sql: str) -> bool:
        """Whether the database runs SQL it builds for `sql` (a `DO` block; a function whose body `EXECUTE`s,
        reached through what it names; a built-in that runs a query it is given as text): what it touches there
        no text says, so PostgreSQL's own counts say (`_touched`)."""
        words = [lexeme.text for lexeme in lex(sql) if lexeme.bare]
        if words[:1] == ["do"]:
            return True
        runs, owners = self.dynamic | self.runs_queries | _RUNS_QUERY_TEXT, _TABLES.owners()
        todo = [*_objects_named(sql, frozenset(self.reads) | frozenset(owners), frozenset(self.calls) | runs)]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in runs:
                return True
            if name not in seen:
                seen.add(name)
                todo.extend((*self.reads.get(name, ()), *self.calls.get(name, ())))
                if owners.get(name, KERNEL) != KERNEL and _writes(sql):  # (as `reached`: a domain's table's)
                    todo.extend(self.fires.get(name, ()))
        return False


# PostgreSQL's built-ins that run a query handed to them whose arguments the catalogue does not name (`ts_rewrite`'s
# second), beside those it does (`Catalog.runs_queries`), and before the catalogue is read.
_RUNS_QUERY_TEXT = frozenset({"ts_stat", "ts_rewrite", "query_to_xml", "query_to_xmlschema",
                              "query_to_xml_and_xmlschema"})
# What this transaction touched so far, per table (this backend's counts, before they are flushed at its end).
_TOUCHED_SQL = (b"SELECT relname, seq_scan + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd + n_tup_del "
                b"FROM pg_stat_xact_user_tables WHERE schemaname = 'public'")


def _touched(driver: Any) -> dict[str, int] | None:
    """The transaction's counts on `driver` (None when it cannot answer now: see `_Catalogs.read`)."""
    from psycopg import pq

    pgconn = driver.pgconn
    if pgconn.transaction_status not in (pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS):
        return None
    result = pgconn.exec_(_TOUCHED_SQL)
    if result.status != pq.ExecStatus.TUPLES_OK:
        return None
    return {bytes(result.get_value(i, 0) or b"").decode(): int(result.get_value(i, 1) or 0)
            for i in range(result.ntuples)}


def check_touched(driver: Any, place: Place, before: dict[str, int], sql: str) -> None:
    """After a statement that ran SQL the database built: the tables its counts grew on, judged as if named."""
    after = _touched(driver) or {}
    owners, reads = _TABLES.owners(), _CATALOGS.catalog.reads
    tables: set[str] = set()
    for name in (name for name, count in after.items() if count > before.get(name, 0)):
        while name not in owners and len(reads.get(name, ())) == 1:  # a partition: its parent's
            name = next(iter(reads[name]))
        tables.add(name)
    foreign = sorted(t for t in tables if t in owners and owners[t] not in (place.domain, KERNEL)
                     and (place.domain, t) not in DECLARED)
    if foreign:
        raise BoundaryViolation(
            f"{place} touched {', '.join(f'{t} ({owners[t]})' for t in foreign)}, another domain's tables (in SQL the "
            f"database built and ran for it, as its pg_stat_xact_user_tables counts): {sql[:160]}")


def _objects_named(sql: str, relations: frozenset[str], functions: frozenset[str], depth: int = 0) -> set[str]:
    """The relations of `relations` `sql` names (as `_named_tables` reads them) and the functions of `functions`
    it calls (a name before `(`), in its strings' SQL too."""
    found = set(_named_tables(sql, relations, depth))
    lexemes = lex(sql)
    for lexeme, after in zip(lexemes, lexemes[1:], strict=False):
        if lexeme.kind == "name" and after.text == "(" and lexeme.text in functions:
            found.add(lexeme.text)
        elif lexeme.kind == "string" and depth < _NESTED:
            found |= _objects_named(lexeme.text, frozenset(), functions, depth + 1)
    return found


class _Catalogs:
    """The catalogue, read again on the next statement's connection after DDL, and after the transaction that ran
    it ends (a statement's reach cached per SQL string until then). Read inside that transaction, it holds what
    the transaction made; a rollback undoes that unseen by any statement (CI failed so: a test's rolled-back
    trigger on chat_sessions refused a later test's UPDATE of it), and a commit shows it to every connection."""

    def __init__(self) -> None:
        self.stale = True
        self.catalog = Catalog({}, {}, {}, set())
        self.reached = _PerStatement(lambda sql: self.catalog.reached(sql, _TABLES.owners()))
        self.builds = _PerStatement(lambda sql: self.catalog.runs_built_sql(sql))
        # Each connection that ran DDL (by id, held weakly): whether its open transaction did. Its close, or its
        # collection, ends the session, and with it a temporary object it made.
        self.made: dict[int, tuple[weakref.ref[Any], bool]] = {}
        self.reads = 0  # how many times it was read (the suite checks it after a test that read it)
        self.source: tuple[str, str | None] | None = None  # the database it was read from (dsn, password)

    def saw_ddl(self, driver: Any) -> None:
        """DDL sent on `driver`: read again on the next statement, once it has run (not before it)."""
        self.stale = True
        if driver is not None:
            key = id(driver)
            held = self.made[key][0] if key in self.made else weakref.ref(driver, lambda _: self.forget(key))
            self.made[key] = (held, True)

    def ended(self, driver: Any, command: bytes) -> None:
        """`command` sent on `driver`: where it ends (or rolls back to a savepoint in) a transaction that ran DDL,
        what the catalogue read there is undone or committed."""
        held, open_ddl = self.made.get(id(driver), (None, False))  # (another thread may have forgotten it)
        if held is None or not open_ddl:
            return
        if _TO_SAVEPOINT.match(command):  # (DDL before the savepoint is still the transaction's)
            self.stale = True
        elif _ENDS_COMMAND.match(command):
            self.made[id(driver)] = (held, False)
            self.stale = True

    def closed(self) -> None:
        """A connection that ran DDL closed since: its session's objects (and an open transaction's) are gone."""
        if self.made:
            for key in [key for key, (held, _) in self.made.items() if getattr(held(), "closed", True)]:
                self.forget(key)

    def forget(self, key: int) -> None:
        self.made.pop(key, None)
        self.stale = True

    def read(self, driver: Any) -> None:
        """Read it on `driver` when it can answer now: a blocking psycopg connection, idle or in a transaction
        that has not failed, not in a pipeline (libpq's own call, past psycopg's lock: the statement waits)."""
        import psycopg
        from psycopg import pq

        if not isinstance(driver, psycopg.Connection) or driver.closed or getattr(driver, "_pipeline", None):
            return
        pgconn = driver.pgconn
        if pgconn.transaction_status not in (pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS):
            return
        inside = pgconn.transaction_status == pq.TransactionStatus.INTRANS
        if inside:  # (a failure must not fail the statement's transaction)
            pgconn.exec_(b"SAVEPOINT boundaries_catalog")
        result = pgconn.exec_(_CATALOG_SQL)
        if inside:
            pgconn.exec_(b"ROLLBACK TO SAVEPOINT boundaries_catalog; RELEASE SAVEPOINT boundaries_catalog")
        if result.status != pq.ExecStatus.TUPLES_OK:  # (never silently blind: every check behind names reads it)
            raise RuntimeError(f"the boundary guard cannot read the catalogue: {result.error_message!r}")
        rows = [tuple(None if (v := result.get_value(i, j)) is None else bytes(v).decode() for j in range(4))
                for i in range(result.ntuples)]
        self.catalog = Catalog.of(cast(list[tuple[str, str, str | None, str | None]], rows),
                                  frozenset(_TABLES.owners()))
        self.reads += 1
        self.source = driver.info.dsn, driver.info.password
        self.reached.clear()
        self.builds.clear()
        self.stale = False


_CATALOGS = _Catalogs()


def phantoms(driver: Any) -> list[str]:
    """What the catalogue this process holds says the database runs behind a name that `driver`'s database (read
    afresh, on it) no longer has: none while it is stale (it is read again before it is used). Partitions are left
    out: the stacks' jobs make and drop them in processes of their own, whose DDL this one does not see. The suite's
    check that no transaction's end or session's close went unseen (a rolled-back trigger judged a later test's
    write)."""
    _CATALOGS.closed()
    if _CATALOGS.stale:
        return []
    held, now = _CATALOGS.catalog, _Catalogs()
    now.read(driver)
    found = [f"{what} {name}: {', '.join(sorted(gone)) or 'itself'}"
             for what, mine, theirs in (("reads", held.reads, now.catalog.reads),
                                        ("fires", held.fires, now.catalog.fires),
                                        ("calls", held.calls, now.catalog.calls))
             for name, reached in mine.items() if name not in held.partitions
             if (gone := reached - theirs.get(name, set())) or name not in theirs]
    return found + [f"{what} {name}" for what, mine, theirs in (("writing", held.writing, now.catalog.writing),
                                                                ("dynamic", held.dynamic, now.catalog.dynamic))
                    for name in sorted(mine - theirs)]


def catalogue_reads() -> int:
    """How many times this process read the catalogue (a test that changed it is checked: `phantoms_where_read`)."""
    return _CATALOGS.reads


def phantoms_where_read() -> list[str]:
    """`phantoms` on a connection of its own to the database the catalogue was last read from; none if that
    database is gone (a test's own, dropped) or the catalogue is stale."""
    import psycopg

    _CATALOGS.closed()
    if _CATALOGS.source is None or _CATALOGS.stale:
        return []
    dsn, password = _CATALOGS.source
    try:
        driver = psycopg.connect(dsn, password=password, connect_timeout=5, autocommit=True)
    except psycopg.OperationalError:
        return []
    with driver:
        return phantoms(driver)


def check_sql(sql: str, start: FrameType | None, driver: Any = None) -> None:
    """Raise when the domain whose code sent `sql` (the innermost domain frame from `start`) names another
    domain's table but as `DECLARED`, or ends the transaction in SQL, or (on `driver`, the psycopg connection it
    runs on) writes in autocommit, a transaction that ends itself, from a file that may end none."""
    ddl = _TABLES.ddl(sql)
    found = _innermost_domain(start)
    if driver is not None and id(driver) in _CATALOGS.made:
        _CATALOGS.ended(driver, sql.encode())
    if found is None:
        if ddl:
            _CATALOGS.saw_ddl(driver)
        return
    place, frame = found
    escape = _TABLES.escapes(sql)
    if escape:
        raise BoundaryViolation(f"{place} {escape}: {sql[:160]}")
    owners = _TABLES.owners()
    behind: frozenset[str] = frozenset()
    _CATALOGS.closed()
    if driver is not None and _CATALOGS.stale and place.role != "migrations":
        _CATALOGS.read(driver)
    if ddl:
        _CATALOGS.saw_ddl(driver)
    if driver is not None:
        behind = _CATALOGS.reached(sql)
        if behind & _CATALOGS.catalog.privileged:
            raise BoundaryViolation(f"{place} {_PRIVILEGED}: {sql[:160]}")
    foreign = sorted(t for t in _TABLES.named(sql) | behind  # (behind: only tables, past the check above)
                     if owners[t] not in (place.domain, KERNEL) and (place.domain, t) not in DECLARED)
    if foreign:
        through = " (behind a view, rule, trigger, function or partition it names)" if set(foreign) & behind else ""
        raise BoundaryViolation(
            f"{place} touched {', '.join(f'{t} ({owners[t]})' for t in foreign)}, another domain's tables{through} "
            f"(read them through that domain's api.py): {sql[:160]}")
    past = _past_the_door(frame, start, cast(str, place.domain))
    if past is not None:
        caller, entered, code = past
        raise BoundaryViolation(
            f"{caller} entered {entered}'s {code.co_qualname}, past {entered.domain}/api.py, which sent: {sql[:160]} "
            "(a domain reaches another only through what its api.py exports)")
    sender = _innermost_of_package(start)
    if (sender is not None and sender.in_domain and sender.role not in _SENDS_SQL
            and (_TABLES.named(sql) or behind or _TABLES.writes(sql))):
        raise BoundaryViolation(
            f"{sender} ({sender.role or 'no role'}) sent a statement itself: a domain's SQL is sent by its "
            f"repositories (the kernel's helpers run theirs), whatever builds it: {sql[:160]}")
    if driver is not None and driver.autocommit and _TABLES.writes(sql):
        writer = _writer(start)
        if writer is not None and writer.in_domain and not _under_a_file_that_ends_transactions(start):
            raise BoundaryViolation(
                f"{writer} ({writer.role or 'no role'}) wrote on a connection in autocommit (a read's: the replica's "
                f"or a read-only unit of work's), a transaction that ends outside any unit of work: {sql[:160]}")
    if driver is not None and _CATALOGS.builds(sql):
        if place.role == "migrations" and driver.autocommit:  # (a migration's autocommit block, as written)
            pass
        elif not _answers_now(driver) or driver.autocommit:
            raise BoundaryViolation(
                f"{place} had the database build and run SQL ({sql[:80]}) on a connection where PostgreSQL's counts "
                "cannot say what it touched (autocommit: a read's, or asyncio, or a pipeline): run it in its unit of "
                "work's transaction")
        else:
            before = _touched(driver)
            if before is not None:  # (judged once it has run: `_checked`'s sending)
                _SENDING.watch = (driver, place, before, sql)
    if driver is not None:
        for kind, name in _BY_NAME(sql):
            stored = _stored(driver, kind, name)
            if stored is None:
                raise BoundaryViolation(
                    f"{place} ran a {kind} by name ({name}) on a connection where the guard cannot read what it runs "
                    f"(asyncio, a pipeline): {sql[:160]}")
            if stored:
                check_sql(stored, start, driver)


def _answers_now(driver: Any) -> bool:
    """Whether the guard can ask `driver`'s session a question now (libpq's own call, before the statement): a
    blocking psycopg connection, open, not in a pipeline."""
    import psycopg

    return isinstance(driver, psycopg.Connection) and not driver.closed and not getattr(driver, "_pipeline", None)


# The session's objects a statement runs by name: what it runs is what was stored under it (by whichever domain's
# code stored it), read from the session (`pg_prepared_statements`, `pg_cursors`) and judged as if sent.
_STORED_SQL = {"prepared statement": b"SELECT statement FROM pg_prepared_statements WHERE name = $1",
               "cursor": b"SELECT statement FROM pg_cursors WHERE name = $1"}


def _by_name(sql: str) -> tuple[tuple[str, str], ...]:
    """The prepared statements (`EXECUTE name` wherever it stands: `EXPLAIN EXECUTE`, `CREATE TABLE … AS EXECUTE`;
    not a trigger's `EXECUTE FUNCTION`) and cursors (`FETCH`/`MOVE … name`) `sql`'s statements run."""
    found: list[tuple[str, str]] = []
    statement: list[Lexeme] = []
    for lexeme in [*lex(sql), Lexeme(";", ";")]:
        if lexeme.kind != ";":
            statement.append(lexeme)
            continue
        for word, after in zip(statement, statement[1:], strict=False):
            if word.bare and word.text == "execute" and after.kind == "name" and \
                    not (after.bare and after.text in ("function", "procedure")):
                found.append(("prepared statement", after.text))
        names = [lexeme.text for lexeme in statement[1:] if lexeme.kind == "name"]
        if statement and statement[0].bare and statement[0].text in ("fetch", "move") and names:
            found.append(("cursor", names[-1]))
        statement = []
    return tuple(found)


_BY_NAME = _PerStatement(_by_name)


def _stored(driver: Any, kind: str, name: str) -> str | None:
    """The SQL stored in `driver`'s session under `name` ('' when there is none; None when it cannot be read now)."""
    from psycopg import pq

    if not _answers_now(driver):
        return None
    pgconn = driver.pgconn
    if pgconn.transaction_status not in (pq.TransactionStatus.IDLE, pq.TransactionStatus.INTRANS):
        return ""  # (a failed transaction runs nothing)
    result = pgconn.exec_params(_STORED_SQL[kind], [name.encode()])
    if result.status != pq.ExecStatus.TUPLES_OK or not result.ntuples:
        return ""
    return bytes(result.get_value(0, 0) or b"").decode()


# domain -> the codes of what its api.py exports (functions, classes' own methods, what they nest), once loaded.
_EXPORTS: dict[str, frozenset[int]] = {}


def _exported(value: Any, domain: str) -> Iterator[CodeType]:
    """The codes of `value`, an api.py's name: a function's (and what it nests), a class's own functions (its
    bases' in the domain too), a property's, a static or class method's."""
    if isinstance(value, type):
        for klass in value.__mro__:
            if klass.__module__.startswith(f"persona_service.{domain}."):
                for member in vars(klass).values():
                    yield from _exported(member, domain)
    elif isinstance(value, (staticmethod, classmethod)):
        yield from _exported(value.__func__, domain)
    elif isinstance(value, property):
        for function in (value.fget, value.fset, value.fdel):
            yield from _exported(function, domain)
    elif isinstance(getattr(value, "__code__", None), CodeType):
        codes = [value.__code__]
        while codes:
            code = codes.pop()
            yield code
            codes.extend(c for c in code.co_consts if isinstance(c, CodeType))


def _exports(domain: str) -> frozenset[int]:
    found = _EXPORTS.get(domain)
    if found is None:
        api = sys.modules.get(f"persona_service.{domain}.api")
        if api is None:  # (not loaded: nothing of it reached yet through its door)
            return frozenset()
        codes = [code for value in vars(api).values() for code in _exported(value, domain)]
        _SEEN.extend(codes)
        found = _EXPORTS[domain] = frozenset(map(id, codes))
    return found


def _past_the_door(found: FrameType | None, start: FrameType | None, domain: str) -> tuple[Place, Place, CodeType] | None:
    """Whether the code of `domain` that sent a statement (its innermost frame `found`, or None when that is in
    a carrier's origin, then read from `start`) was entered from another domain's code but through what its
    api.py exports: (the caller, the place entered, its code), else None. The walk ends at the first frame of the
    package not `domain`'s: the kernel there (a dispatch) is a door of its own, and so is module.py, whose
    declared ports the kernel hands to others (a module's erasure, run by privacy's loop)."""
    places = _PLACES
    if found is None:
        return _entered(_codes(start), domain)
    inner = (places.get(id(found.f_code)) or _place(found.f_code), found.f_code)
    frame = found.f_back
    while frame is not None:  # (every statement of a domain's: inline, to the first frame not its own)
        place = places.get(id(frame.f_code)) or _place(frame.f_code)
        if place.domain == domain:
            inner = place, frame.f_code
        elif place is _CARRIER:
            return _entered(itertools.chain([inner[1]], _codes(frame)), domain)
        elif place.domain is not None:
            return _judged(place, inner, domain)
        frame = frame.f_back
    return None


def _entered(codes: Iterator[CodeType], domain: str) -> tuple[Place, Place, CodeType] | None:
    inner: tuple[Place, CodeType] | None = None
    for code in codes:
        place = _place(code)
        if place.domain == domain:
            inner = (place, code)
        elif place.domain is not None and inner is not None:
            return _judged(place, inner, domain)
    return None


def _judged(caller: Place, inner: tuple[Place, CodeType], domain: str) -> tuple[Place, Place, CodeType] | None:
    if not caller.domain or inner[0].role == "module" or id(inner[1]) in _exports(domain):
        return None
    return caller, inner[0], inner[1]


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


def _under_a_file_that_ends_transactions(start: FrameType | None) -> bool:
    """Whether a job, command, module.py or migration is on the stack: the code that opened the autocommit
    connection its repository writes on (a read's connection is opened by the kernel, under none of these)."""
    return any((place := _place(code)).in_domain and place.role in _ENDS_TRANSACTIONS for code in _codes(start))


def check_commit(conn: Connection, start: FrameType | None) -> None:
    """Raise when a domain's code commits: a unit of work's transaction but in `UnitOfWork.commit`, any other
    but in a job, a command or module.py. The committer is the innermost frame of the package: the kernel's
    own transactions (the audit log a provider's retry writes, a task's claim) end in the kernel, whoever
    called the capability, and code outside the package (a test) is not checked."""
    place = _innermost_of_package(start)
    if place is None or not place.in_domain:
        return
    if conn.info.get(_UOW):
        if _UOW_COMMITS not in _codes(start):
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


def check_close(conn: Connection, start: FrameType | None) -> None:
    """Closing or invalidating a unit of work's connection while its transaction is open ends it (rolled back
    on the pool's return, or lost with the connection): the unit of work's to do, never a domain's."""
    if conn.closed or conn.invalidated or not conn.info.get(_UOW):
        return
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} closed a unit of work's connection, its transaction open (the unit of "
                                "work ends it)")


def check_driver_close(driver: Any, start: FrameType | None) -> None:
    """A driver connection SQLAlchemy pools, closed beneath it by a domain: its transaction ends with it."""
    if driver not in _POOLED or driver.closed:
        return
    for code in _codes(start):
        if _SQLALCHEMY in code.co_filename:
            return
        place = _place(code)
        if place.domain is not None:
            if place.in_domain:
                raise BoundaryViolation(f"{place} closed the driver's connection beneath SQLAlchemy (its pool's, "
                                        "whose transaction the unit of work ends)")
            return


def check_network(start: FrameType | None, what: str = "opened a network connection") -> None:
    """A service or repository never reaches the network: the innermost frame of the package must not be one,
    and a repository's own helpers are the repository's (it holds its unit of work's connection while it waits).
    A service calling its domain's client file (files/s3.py) is the layout's way, so past the innermost frame only
    a repository of the same domain refuses; the kernel's clients (hints, the object store) answer for
    themselves."""
    place = _innermost_of_package(start)
    if place is None or not place.in_domain:
        return
    through = place
    if place.named not in _NO_NETWORK:
        through = next((p for p in map(_place, _codes(start)) if p.domain is not None and p.domain != place.domain
                        or p.named == "repository"), place)
        if through.domain != place.domain:
            return
    if through.named in _NO_NETWORK:
        via = f" (through {place})" if through is not place else ""
        raise BoundaryViolation(f"{through}{via} {what}: a {through.named} calls the kernel's clients (or "
                                "its domain's client file) and is handed its connection by the unit of work, never "
                                "the network")


def check_introspection(start: FrameType | None, event: str) -> None:
    """The garbage collector's views of every object (`gc.get_referents`, `get_referrers`, `get_objects`): libpq's
    handle, another domain's repositories and the kernel's clients are all there, past every door; a domain's code
    has no business there."""
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} read the interpreter's objects ({event}): what it reaches there (libpq's "
                                "handle, another domain's state) passes every door")


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
        while frame is not None and frame.f_code not in _UOW_OPENS:  # (every transaction's whole stack: inline)
            frame = frame.f_back
        if frame is not None:
            conn.info[_UOW] = conn.info[_HELD] = True
            return
        conn.info[_UOW] = False
        if conn.info.get(_HELD):
            check_after_the_unit_of_work(_caller())


def check_after_the_unit_of_work(start: FrameType | None) -> None:
    """A transaction begun on a unit of work's connection after it ended its own (SQL a domain runs past the call's
    commit: a generator drained late, a callback): what it writes never commits, what it reads leaves the call's
    snapshot; the unit of work begins every transaction of its connection."""
    place = _innermost_of_package(start)
    if place is not None and place.in_domain:
        raise BoundaryViolation(f"{place} began a transaction on a unit of work's connection after the unit of work "
                                "ended its own (SQL past the call's commit)")


def _checkin(driver: Any, record: Any) -> None:
    if record is not None:
        record.info.pop(_HELD, None)


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
        start = sys._getframe(1)
        check_network(start, "opened a database connection")
        taker = _innermost_of_package(start)
        if taker is not None and taker.in_domain and taker.role not in _ENDS_TRANSACTIONS:
            raise BoundaryViolation(
                f"{taker} ({taker.role or 'no role'}) took a connection of its own from the pool: a call's "
                "connection is its unit of work's (a read beside it: `read_apart`); only jobs, commands, module.py "
                "and migrations open their own")


class BoundaryGuard:
    """The guard in this process (`install_process`): its checks watch every engine, the replica's and any other
    as the primary's, so `install` names one only for its callers' sake."""

    def install(self, engine: Engine) -> None:
        install_process()


# Every way a process reaches the network itself: a connection, a datagram, a listener, a name looked up; and a
# process started (it may reach anything, from no frame the guard sees).
_NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                   "socket.getnameinfo", "socket.sendto", "socket.sendmsg", "socket.bind"}
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork",
                   "os.forkpty",
                   # native code loaded or looked up (`ctypes.CDLL(None).connect`): its calls pass no audit hook
                   "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"}
# The interpreter's objects, reached past every attribute (`gc.get_referents(driver)` holds libpq's handle, and
# every other domain's state): no domain's code reads them.
_INTERPRETERS_OBJECTS = {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}
_WATCHED = frozenset(_NETWORK_EVENTS | _PROCESS_EVENTS | _INTERPRETERS_OBJECTS)
_REDIS_CODE = "/redis/"
# The addresses redis-py connects to (learnt as it does): a socket of a domain's own to one is Redis itself.
_REDIS_ADDRESSES: set[Any] = set()
_state = {"installed": False, "on": False}
_SIGNAL = __import__("signal").signal  # (the standard one, which `install_process` wraps)
_ATEXIT = __import__("atexit").register  # (likewise)
_LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "0.0.0.0", "::", "localhost"})


def _endpoint(address: Any) -> Any:
    """Where a socket connects, one spelling per endpoint: a Unix socket's real path, a local port."""
    if isinstance(address, (str, bytes)):
        return os.path.realpath(os.fsdecode(address))
    host, port = tuple(address)[:2]
    return ("local", port) if host in _LOCAL_HOSTS or str(host).startswith("127.") else (host, port)


def _audit(name: str, args: tuple[Any, ...]) -> None:
    if name not in _WATCHED or not _state["on"]:  # (every frame the guard reads is an event: one lookup)
        return
    if name in _NETWORK_EVENTS:
        start = sys._getframe(1)
        if name == "socket.connect":
            address = _endpoint(args[1])
            if any(_REDIS_CODE in code.co_filename for code in _codes(start)):
                _REDIS_ADDRESSES.add(address)
            elif address in _REDIS_ADDRESSES:
                check_redis(start, "connected to Redis")
        check_network(start)
    elif name in _PROCESS_EVENTS:
        check_network(sys._getframe(1), f"started a process or native code ({name}), which may reach anything")
    elif name in _INTERPRETERS_OBJECTS:
        check_introspection(sys._getframe(1), name)


_Check = Callable[[Any, tuple[Any, ...], FrameType], None]


def _checked(method: Callable[..., Any], check: _Check) -> Callable[..., Any]:
    """`method`, running `check(self, its arguments, its caller's frame)` first while the guard is on (for a
    coroutine function too: the check runs where it is called, in its awaiting caller's frames)."""
    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _state["on"]:
            check(self, args, sys._getframe(1))
        return method(self, *args, **kwargs)

    @functools.wraps(method)
    def sending(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _state["on"]:
            return method(self, *args, **kwargs)
        _SENDING.__dict__.pop("watch", None)
        check(self, args, sys._getframe(1))
        watch = _SENDING.__dict__.pop("watch", None)
        result = method(self, *args, **kwargs)
        if watch is not None:
            check_touched(*watch)
        return result
    return sending if check is _sql_of else guarded


# A statement psycopg is sending on this thread whose tables PostgreSQL's counts say once it has run (`check_sql`
# leaves it here; `_checked`'s sending judges it).
_SENDING = threading.local()


def _sql_of(cursor: Any, args: tuple[Any, ...], start: FrameType) -> None:
    query = args[0] if args else ""
    if isinstance(query, bytes):
        query = query.decode()
    elif not isinstance(query, str):  # psycopg.sql's Composable (`sql.Identifier("x")`): the SQL it makes
        query = query.as_string(cursor) if hasattr(query, "as_string") else str(query)
    check_sql(query, start, cursor.connection)


def _command_of(driver: Any, args: tuple[Any, ...], start: FrameType) -> None:
    """psycopg's `_exec_command`: the commands it sends itself (BEGIN, COMMIT, ROLLBACK, SAVEPOINT…)."""
    command = args[0]
    if not isinstance(command, bytes):
        command = command.encode() if isinstance(command, str) else command.as_bytes(driver)  # (a Composable)
    if id(driver) in _CATALOGS.made:
        _CATALOGS.ended(driver, command)
    if _ENDS_COMMAND.match(command):
        check_driver_end(driver, command, start)


def check_beneath(start: FrameType | None, what: str) -> None:
    """libpq's own connection (its handle, `pgconn`, or its socket) taken by a domain's code: beneath the driver,
    where the guard sees no statement, commit or connection (`pgconn.exec_`, raw protocol on the socket). Judged by
    the frame that takes it (psycopg's own, a library's, is the driver at work)."""
    place = _place(start.f_code) if start is not None else _OUTSIDE
    if place.in_domain:
        raise BoundaryViolation(f"{place} took libpq's connection beneath the driver ({what}): a domain's SQL goes "
                                "through the driver's cursors, where the guard reads it")


# libpq's handle as psycopg's objects hold it outside a slot (their instance dicts): by id(holder), so no dict of
# theirs (`vars(driver)`, `driver.__dict__`) holds it; each entry leaves with its holder.
_HANDLES: dict[int, tuple[weakref.ref[Any], Any]] = {}


def _beneath(cls: type, name: str) -> None:
    """`cls`'s attribute `name`, libpq's connection it holds, checked when read (`check_beneath`): a property over
    its slot, or over a table of the guard's (`_HANDLES`: an instance's dict would hand it to `vars()`)."""
    slot = vars(cls).get(name)

    def get(self: Any) -> Any:  # (psycopg reads it a few times a statement: its own frames, inline)
        if slot is not None:
            value = slot.__get__(self, cls)
        else:
            held = _HANDLES.get(id(self))
            if held is None or held[0]() is not self:
                raise AttributeError(name)
            value = held[1]
        if _state["on"]:
            # Whoever reads it, sending or not: a domain's dumper or notice handler runs inside psycopg's send, its
            # own frame the reader (psycopg's C code reads it from psycopg's frames, or the guard's).
            code = sys._getframe(1).f_code
            if (_PLACES.get(id(code)) or _place(code)).domain:
                check_beneath(sys._getframe(1), name)
        return value

    def put(self: Any, value: Any) -> None:
        if slot is not None:
            slot.__set__(self, value)
        else:
            key = id(self)
            _HANDLES[key] = (weakref.ref(self, lambda _: _HANDLES.pop(key, None)), value)

    setattr(cls, name, property(get, put))


def _only(check: Callable[..., None], *what: str) -> _Check:
    """A check that reads the caller's frame only."""
    return lambda _, __, start: check(start, *what)


def install_process() -> None:
    """Turn the SQL, transaction, connection, network and Redis checks on in this process, on every engine and
    driver connection (the hooks stay: Python cannot remove an audit hook, so `guarding(False)` turns them off)."""
    if not _state["installed"]:
        import grpc._channel
        import grpc.aio._channel
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
        event.listen(Pool, "checkin", _checkin)
        hooks: list[tuple[type, str, _Check]] = [
            (threading.Thread, "start", _starting),
            *((Connection, name, lambda conn, _, start: check_close(conn, start)) for name in ("close", "invalidate")),
            *((cls, "close", lambda driver, _, start: check_driver_close(driver, start))
              for cls in (psycopg.Connection, psycopg.AsyncConnection)),
            *((cls, name, _sql_of) for cls in (psycopg.Cursor, psycopg.ServerCursor, psycopg.AsyncCursor,
                                                 psycopg.AsyncServerCursor)
              for name in ("execute", "executemany", "stream", "copy")),
            (psycopg.BaseConnection, "_exec_command", _command_of),
            # A connection psycopg makes (libpq opens its socket in C, past the audit hook), blocking or asyncio.
            (psycopg.BaseConnection, "_connect_gen", _only(check_network, "opened a database connection")),
            # A gRPC channel of a service's or repository's own: its core opens sockets in C, past the audit hook.
            *((cls, "__init__", _only(check_network, "opened a network connection (a gRPC channel)"))
              for cls in (grpc._channel.Channel, grpc.aio._channel.Channel)),
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
        # libpq's connection, wherever psycopg holds it (its connection, cursors, copies, pipelines, transactions,
        # connection info) and its socket: what a domain does there passes every hook above.
        import psycopg._connection_info
        import psycopg._copy
        import psycopg._copy_async
        import psycopg._copy_base
        import psycopg._cursor_base
        import psycopg._pipeline_base
        import psycopg.transaction

        for holder, attribute in ((psycopg.BaseConnection, "pgconn"), (psycopg._connection_info.ConnectionInfo, "pgconn"),
                                  (psycopg._pipeline_base.BasePipeline, "pgconn"),
                                  (psycopg.transaction.BaseTransaction, "pgconn"),
                                  (psycopg._cursor_base.BaseCursor, "_pgconn"), (psycopg._copy_base.BaseCopy, "_pgconn"),
                                  (psycopg._copy.LibpqWriter, "_pgconn"), (psycopg._copy_async.AsyncLibpqWriter, "_pgconn")):
            _beneath(holder, attribute)
        hooks.append((psycopg.BaseConnection, "fileno", lambda _, __, start: check_beneath(start, "fileno()")))
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
        # A process started past the audit hook (multiprocessing's spawn and forkserver, a process pool's:
        # `_posixsubprocess.fork_exec`, which `subprocess.Popen`'s audit event covers for its own calls).
        import _posixsubprocess
        import signal
        import weakref as weakrefs

        fork_exec = _posixsubprocess.fork_exec

        @functools.wraps(fork_exec)
        def forks(*args: Any, **kwargs: Any) -> Any:
            if _state["on"]:
                check_network(sys._getframe(1), "started a process (fork_exec), which may reach anything")
            return fork_exec(*args, **kwargs)

        _posixsubprocess.fork_exec = forks
        # Work run later from wherever the process then is: a finalizer, a signal's handler.
        weakrefs.finalize.__init__ = _handing_over(weakrefs.finalize.__init__, 1)  # type: ignore[method-assign]
        # (a partial, C: the frame `_handing_over` reads is the caller's)
        signal.signal = functools.partial(_handing_over(lambda _, signalnum, handler: _SIGNAL(signalnum, handler),
                                                        1), None)
        # A thread started past `threading` (`_thread.start_new_thread`, threading's own name for it): its function
        # carries its starter's stack as a Thread's target does (`_starting`; a Thread's own bootstrap passes).
        import _thread

        start_new_thread, bootstrap = _thread.start_new_thread, threading.Thread._bootstrap  # type: ignore[attr-defined]
        bare = _handing_over(lambda _, function, *args, **kwargs: start_new_thread(function, *args, **kwargs), 0,
                             anywhere=True)

        def starts_new_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(function, "__func__", None) is bootstrap:  # (a Thread's: `_starting` judged its target)
                return start_new_thread(function, *args, **kwargs)
            return bare(None, function, *args, **kwargs)

        _thread.start_new_thread = _thread.start_new = starts_new_thread
        threading._start_new_thread = starts_new_thread  # type: ignore[attr-defined]
        # ... and at the interpreter's exit (a C function: `_handing_over` reads its caller's frame).
        import atexit

        atexit.register = functools.partial(_handing_over(lambda _, function, *args, **kwargs: _ATEXIT(
            function, *args, **kwargs), 0), None)
        # Work handed to another thread or to the event loop (`_handing_over`): every callback the loop runs is a
        # Handle's (`call_soon`, `call_later`, `call_at`, `add_reader`/`add_writer`, a signal's), made where it is
        # handed over.
        executor, loop = concurrent.futures.ThreadPoolExecutor, asyncio.BaseEventLoop
        executor.submit = _handing_over(executor.submit, anywhere=True)  # type: ignore[method-assign]
        asyncio.events.Handle.__init__ = _handing_over(asyncio.events.Handle.__init__, 0)  # type: ignore[method-assign]
        loop.create_task = _handing_over(loop.create_task, 0, coroutine=True)  # type: ignore[method-assign]
        # A log handler a domain makes whose `emit` is a library's (a socket's, HTTP's, syslog's) runs from whoever
        # logs: it carries its maker's stack, as work handed over does.
        import logging

        logging.Handler.__init__ = _made(logging.Handler.__init__)  # type: ignore[method-assign]
        logging.Handler.handle = _handled(logging.Handler.handle)  # type: ignore[method-assign]
        _state["installed"] = True
    _state["on"] = True


def guarding(on: bool) -> bool:
    """Turn this process's checks on or off; whether they were on (a test turns them back as they were)."""
    was = _state["on"]
    if on:
        if not was:  # (what ran while off was not seen: DDL, a transaction's end)
            _CATALOGS.stale = True
        install_process()
    else:
        _state["on"] = False
    return was


def is_on() -> bool:
    """Whether this process's checks are on (a test suite asks that each test left them so)."""
    return _state["on"]
