"""The call's unit of work as a domain's service holds it: what is bound to its connection, never the connection.

A service is handed a `Work` (a servicer's `ctx.work`, a job's `runtime.work()`, a port's argument) and asks it
for its repositories: `work.of(PersonaRepository)` builds the repository on the unit of work's connection, once
per unit of work. What a change records is written in it too: `Outbox(work)`, `AuditLog(work)`,
`enqueue(work, …)`; and `work.savepoint()` rolls a block back on its own. The connection itself is not among what a Work hands out, so a service cannot run SQL,
commit, or open a transaction beside the call's, whatever it spells: SQL lives where the connection is, in
repositories and the kernel (tests/kernel/test_work.py; the runtime guard, kernel.data.boundaries, refuses a
statement sent from anywhere else).

`of` binds repositories only: a class defined in a domain's repository module (`repository.py`,
`*_repository.py`) whose constructor takes the connection, which it keeps private (`self._conn`). Anything else (a service, another domain's directory) takes the Work itself.
The connection opens on first use, as the unit of work's does: a call that reads nothing opens nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from sqlalchemy import Connection


R = TypeVar("R")


class NotARepository(TypeError):
    """`Work.of` was handed something other than a repository class: a service takes the Work, not a connection."""


class NoDatabase(LookupError):
    """A Work made of records alone (`Work.of_records`) was asked for a repository it was not given."""


_REPOSITORIES: set[type] = set()  # classes already checked by `_repository` (one test a class, not one a call)


def _repository(kind: object) -> None:
    if kind in _REPOSITORIES:
        return
    module = getattr(kind, "__module__", "") or ""
    leaf = module.rpartition(".")[2]
    domain = not module.startswith("persona_service.kernel.")  # the kernel's own (tasks, outbox) sit behind its API
    if not (isinstance(kind, type) and domain and (leaf == "repository" or leaf.endswith("_repository"))
            and _defined_where_it_says(kind, module)):
        raise NotARepository(f"{kind!r} is not a repository class: Work.of binds repositories to the unit of work")
    _REPOSITORIES.add(kind)


def _defined_where_it_says(kind: type, module: str) -> bool:
    """The class is the one its module defines under its name: `__module__` and `__qualname__` are writable, so a
    class made elsewhere (a service's `type(..., {'__module__': '….repository'})`, a file rebinding `__name__`)
    could claim a repository's module to be handed the connection."""
    found: object = sys.modules.get(module)
    for part in kind.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is kind


class Work:
    """One unit of work, seen from a domain: its repositories and savepoints."""

    __slots__ = ("_connect", "_bound")

    def __init__(self, connect: Callable[[], Connection]) -> None:
        self._connect = connect  # the unit of work's connection, opened on first use
        self._bound: dict[type, object] = {}

    @classmethod
    def of_records(cls, repositories: Iterable[object]) -> Work:
        """A Work with no database: `of(Repository)` answers the object given for that class (a test's repository
        kept in memory, an instance of the class or of a subclass), and no other. A service then runs on a Work
        built in a test, with no stack, servicer, pipeline nor App."""
        def no_database() -> Connection:
            raise NoDatabase("this Work has no database: give it every repository its service asks for")

        work = cls(no_database)
        for repository in repositories:
            for kind in type(repository).__mro__:
                if kind is not object and kind not in work._bound:
                    work._bound[kind] = repository
        return work

    @classmethod
    def on(cls, conn: Connection) -> Work:
        """The Work of a transaction composition code holds (a job's, a command's, a migration's, a port's
        caller's): the connection stays with whoever opened it."""
        return cls(lambda: conn)

    def of(self, repository: Callable[[Connection], R]) -> R:
        """`repository` bound to this unit of work's connection (built once; the same object every time)."""
        bound = self._bound.get(cast(type, repository))
        if bound is None:
            _repository(repository)
            bound = self._bound[cast(type, repository)] = repository(self._connect())
        return cast(R, bound)

    def savepoint(self) -> AbstractContextManager[object]:
        """A savepoint: the block's writes (and the locks they took) are rolled back if it raises, and the unit
        of work goes on."""
        return self._connect().begin_nested()


def connection_of(work: Work) -> Callable[[], Connection]:
    """The kernel's own way to the unit of work behind a `Work` (a capability a servicer calls with its Work, the
    limits resolver's reads): opens it on first use, as the Work does. Not in the kernel's door."""
    return work._connect
