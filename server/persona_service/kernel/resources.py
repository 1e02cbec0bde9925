"""What a process owns besides its pools, and what background work sees of it.

A `Resource` is a long-lived object a module opens once per process (an
object store's client, which holds a connection pool; a model provider): the
App opens it on first use, keeps it (`Resources`) and closes it with itself.
No module-level cache: two Apps in one process (the tests' stacks) each own
their own.

Background work (`Module.jobs`, `Module.tasks`) receives a `Runtime`, not the
App: transactions on the pool it runs on, the clock, the process's resources
and model provider, the audit log, the invalidation bus and the modules'
declarations. Servicers receive `ServicerDeps`, what a request's handler may
use of its process; only the process assembly (persona_service.process) sees
the App (no pools, Redis nor settings)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Generic, ParamSpec, Protocol, TypeVar, cast

from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.work import Work

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from persona_service.kernel.models import Model, Provider
    from persona_service.kernel.ports import ModuleHooks
    from persona_service.kernel.principal import Principal
    from persona_service.kernel.secretbox import SecretBox
    from persona_service.kernel.settings import Settings
    from persona_service.kernel.transport.audit import AuditEntry
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.cursors import CursorCodec
    from persona_service.kernel.transport.hints import Hints
    from persona_service.kernel.transport.limits.plans import Limits, Quota

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


@dataclass(frozen=True)
class Check:
    """One readiness check's outcome (`ServicerDeps.readiness`; the checks: process.readiness)."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True, eq=False)  # identity: each declared resource is its own key
class DeclaredResource:
    """A resource as a module declares it (`Module.resources`): a Resource[T] of any T. (A Resource's T is
    invariant, being both opened and closed, so no Resource[object] would hold them all.)"""

    name: str


@dataclass(frozen=True, eq=False)
class Resource(DeclaredResource, Generic[T]):
    open: Callable[[Settings], T]
    close: Callable[[T], None] | None = None


class UndeclaredResource(LookupError):
    """A Resource no module declares (`Module.resources`) was asked for: only declared ones open."""


class Resources:
    """The resources one App opened (each at most once, even when threads race for it), of those the modules
    declare (`Module.resources`): an opener is handed the process's settings, so a Resource made anywhere else
    (a servicer's own, whose opener hands them back) is refused rather than opened."""

    def __init__(self, settings: Settings, declared: Iterable[DeclaredResource]):
        self._settings = settings  # what resources open with; not for their users
        self._declared = frozenset(declared)
        self._lock = threading.Lock()
        self._opened: dict[DeclaredResource, tuple[object, Callable[[], None] | None]] = {}

    def get(self, resource: Resource[T]) -> T:
        if resource not in self._declared:
            raise UndeclaredResource(f"the resource {resource.name!r} is not declared by a module (Module.resources)")
        with self._lock:
            if resource not in self._opened:
                value, close = resource.open(self._settings), resource.close
                self._opened[resource] = value, None if close is None else functools.partial(close, value)
            return cast(T, self._opened[resource][0])  # what `resource`, a Resource[T], opened

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, {}
        for _, close in opened.values():
            if close is not None:
                close()


class HasResources(Protocol):
    """What owns resources: an App, a servicer's deps, or a job's or task's runtime."""

    @property
    def resources(self) -> Resources: ...


@dataclass(frozen=True)
class Runtime:
    """What a job or a task may use of its process."""

    engine: Engine  # the pool it runs on (jobs: the unary one; tasks: the stream one)
    resources: Resources
    provider: Model  # the process's model (without retries; a task binds it to its own ModelCall)
    audit: Callable[[list[AuditEntry]], int]  # rows written in a transaction of their own
    invalidate: Callable[[str], None]  # broadcast a cache invalidation (process.invalidations)
    modules: ModuleHooks
    clock: Callable[[], datetime] = field(default=utcnow)

    def begin(self) -> AbstractContextManager[Connection]:
        """A unit of work: commits when the block ends, rolls back if it raises."""
        return self.engine.begin()

    def connect(self) -> AbstractContextManager[Connection]:
        """A connection for reads."""
        return self.engine.connect()

    @contextmanager
    def work(self) -> Iterator[Work]:
        """A unit of work as services take it (kernel.data.work): commits when the block ends, rolls back if it
        raises."""
        with self.engine.begin() as conn:
            yield Work.on(conn)


class WaitUntil(Protocol):
    """Wait up to `timeout` seconds for `check()` to return something (kernel.transport.tasks.TaskEvents.wait_until)."""

    def __call__(self, check: Callable[[], T | None], timeout: float, /) -> T | None: ...


class TaskSignals:
    """What a servicer may do with its process's task threads, as plain functions over their
    `kernel.transport.tasks.TaskEvents`: nothing here leads back to the runner, its pool or the App."""

    __slots__ = ("_wait_until", "wake")

    def __init__(self, wake: Callable[[], None], wait_until: WaitUntil) -> None:
        self.wake = wake  # a task was committed here: a runner thread looks at once
        self._wait_until = wait_until

    def wait_until(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """Wait up to `timeout` seconds for `check()` to return something (kernel.transport.tasks.TaskEvents.wait_until)."""
        return self._wait_until(check, timeout)


def plain(method: Callable[P, R]) -> Callable[P, R]:
    """A plain function that calls `method`: whoever holds it cannot reach the method's object
    (a bound method's `__self__`: the App, an engine, a Redis client)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(*args, **kwargs)

    call.__name__ = call.__qualname__ = getattr(method, "__name__", "call")
    return call


class ReadApart(Protocol):
    """`read(work)` in a read-only unit of work of its own, outside the call's (it sees what other transactions
    committed since the call began), its connection returned to the pool after."""

    def __call__(self, read: Callable[[Work], T], /) -> T: ...


def read_apart(engine: Engine) -> ReadApart:
    """A `ReadApart` on `engine`'s pool: its holder reads, and cannot write nor keep the connection."""
    connect = plain(engine.connect)

    def apart(read: Callable[[Work], T], /) -> T:
        with connect() as conn:
            return read(Work.on(conn.execution_options(postgresql_readonly=True)))

    return apart


@dataclass(frozen=True)
class ServicerDeps:
    """What a servicer may use of its process, built once by the App and
    handed to every servicer (`ServiceBinding.servicer`). A call's unit of
    work is its RequestContext's; nothing here opens another but `read_apart`,
    which only reads. The callables are plain functions (`plain`, or built by
    process.capabilities over only what each uses), never bound methods
    of the App, an engine or a Redis client; what they close over is checked
    by tests/kernel/test_capabilities.py (docs/architecture.md)."""

    cursors: CursorCodec
    secret_box: SecretBox
    resources: Resources
    modules: ModuleHooks
    provider_for: Callable[[RequestContext], Provider]  # retried, failed attempts audited under the caller
    quota: Callable[[Principal, str, Work], Quota]  # (caller, Limits field, the call's unit of work)
    # Generations the caller's organization used of its monthly quota in the current period (caller, unit of work).
    generations_used: Callable[[Principal, Work], int]
    limits: Callable[[Principal, Work], Limits]  # the caller's organization's limits (the call's unit of work)
    invalidate: Callable[[str], None]  # broadcast a cache invalidation (process.invalidations), e.g. after a commit
    tasks: TaskSignals
    read_apart: ReadApart  # a read outside the call's unit of work (e.g. a row another transaction settles)
    readiness: Callable[[], list[Check]]  # the process's readiness checks (process.readiness)
    draining: Callable[[], bool]  # the process is leaving rotation (process.server.drain)
    unary_workers: int  # threads serving unary calls (a servicer may bound how many of them wait)
    hints: Hints  # short-lived values shared by the processes (Redis) that only save work (kernel.transport.hints)
