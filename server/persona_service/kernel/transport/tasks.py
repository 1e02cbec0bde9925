"""Durable tasks: background work that must happen once the change that
asked for it commits (render a portrait, build an export), whichever process
is alive then.

A module declares its kinds (`Module.tasks`). A service enqueues a task in
its unit of work (`enqueue`): the task exists exactly when the change does.
Every runner process (process.runner; a one-process `all` App too) runs a few
task threads (`TaskRunner`, on the stream pool's connections) that claim due tasks with
`FOR UPDATE SKIP LOCKED`, fairly across organizations, under a lease (its
kind's; a streamed run's, kernel.transport.runs, is short and renewed): if the process
dies mid-task the lease runs out and another process takes it again. A task that raises is retried with backoff; after its last attempt
its kind's `give_up` settles it (e.g. marks the portrait `failed`). A
task committed anywhere wakes the runners at once (a notification on
`TASKS_CHANNEL`); they poll only as a safety net.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Generic, TypeVar

from persona_service.kernel import metrics
from persona_service.kernel.data import outages as database
from persona_service.kernel.data.tasks_repository import TaskRecord, TaskRepository, notify
from persona_service.kernel.data.work import Work, connection_of
from persona_service.kernel.logs import Throttled

if TYPE_CHECKING:
    from sqlalchemy import Engine


log = logging.getLogger("persona_service.tasks")
_warn = Throttled(log)

T = TypeVar("T")
# The runtime a task's work is handed (kernel.resources.Runtime): the runner only passes it on, so
# it is a type parameter here rather than an import of the process part, which builds the runner.
R = TypeVar("R", contravariant=True)
RT = TypeVar("RT")
KEEP_FINISHED = timedelta(days=1)
# Runner processes LISTEN here (process.runner): a task committed by a server process wakes their task threads.
TASKS_CHANNEL = "persona_tasks"


@dataclass(frozen=True)
class TaskKind(Generic[R]):
    name: str
    # The work, in transactions of its own (`Runtime.begin`, on the stream pool); raising retries it.
    run: Callable[[R, TaskRecord], None]
    # Called once the last attempt failed (in a transaction of its own).
    give_up: Callable[[R, TaskRecord, str], None]
    max_attempts: int = 3
    # A failed attempt is retried after backoff × 2^(attempt - 1) seconds.
    backoff_seconds: float = 2.0
    # Longest an attempt may take before another process may take the task over.
    lease_seconds: float = 900.0
    # True while this process must take no task of the kind (e.g. it is handing its runs over).
    paused: Callable[[], bool] = lambda: False


def enqueue(work: Work, kind: str, org_id: str, subject_id: str = "",
            payload: Mapping[str, object] | None = None) -> str:
    """A task that runs once this unit of work commits (and never if it rolls back)."""
    task_id, conn = "task_" + uuid.uuid4().hex, connection_of(work)()
    TaskRepository(conn).add(id=task_id, kind=kind, org_id=org_id, subject_id=subject_id, payload=dict(payload or {}))
    notify(conn, TASKS_CHANNEL)
    return task_id


class TaskEvents:
    """What passes between a process's task threads and its other threads: wakes (a task was committed
    here) and settlements (a task of this process finished). It holds no pool: a servicer's wake-ups
    (kernel.resources.TaskSignals) are this, not the runner."""

    __slots__ = ("_changed", "_pending_wakes")

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._pending_wakes = 0

    def wake(self) -> None:
        """A task was committed here: a runner thread looks at once instead of at its next poll."""
        with self._changed:
            self._pending_wakes += 1
            self._changed.notify_all()

    def wait_until(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """Wait up to `timeout` seconds for `check()` to return something
        (e.g. a row once its task settled it); it is asked again whenever a
        task of this process finishes, and every 0.1 s for other processes'."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            left = deadline - time.monotonic()
            if found is not None or left <= 0:
                return found
            with self._changed:
                self._changed.wait(min(left, 0.1))

    def idle(self, seconds: float) -> None:
        """A runner thread that found no task: wait up to `seconds` unless a wake is pending, and take one."""
        with self._changed:
            if self._pending_wakes == 0:
                self._changed.wait(seconds)
            self._pending_wakes = max(0, self._pending_wakes - 1)

    def settled(self) -> None:
        with self._changed:
            self._changed.notify_all()


class TaskRunner(Generic[RT]):
    def __init__(self, runtime: RT, engine: Engine, kinds: dict[str, TaskKind[RT]], workers: int,
                 poll_seconds: float, runtimes: Mapping[str, RT] | None = None) -> None:
        self.runtime = runtime
        # The runtime a kind's work is handed where it is not `runtime` (by kind: its module's declared needs).
        self.runtimes = dict(runtimes or {})
        self.engine = engine
        self.kinds = kinds
        self.workers = workers
        self.poll_seconds = poll_seconds
        self.events = TaskEvents()  # what a servicer's TaskSignals are made of (process.app)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        if not self.kinds:
            return
        for i in range(self.workers):
            thread = threading.Thread(target=self._loop, name=f"tasks-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        self._closing.set()
        self.wake()
        for thread in self._threads:
            thread.join(timeout=5)

    def wake(self) -> None:
        """A task was committed here: a runner thread looks at once instead of at its next poll."""
        self.events.wake()

    def wait_until(self, check: Callable[[], T | None], timeout: float) -> T | None:
        """As `TaskEvents.wait_until`."""
        return self.events.wait_until(check, timeout)

    def purge(self) -> int:
        with self.engine.begin() as conn:
            return TaskRepository(conn).purge_finished(datetime.now(UTC) - KEEP_FINISHED)

    # --- the runner threads ---------------------------------------------------------

    def _loop(self) -> None:
        while not self._closing.is_set():
            leases = {name: kind.lease_seconds for name, kind in self.kinds.items() if not kind.paused()}
            try:
                with self.engine.begin() as conn:
                    task = TaskRepository(conn).claim(leases) if leases else None
            except Exception as exc:  # noqa: BLE001 - the database is away: try again later
                if database.unavailable(exc):  # every poll of every thread fails: one line per 10 s
                    _warn.warning("claim", "tasks not claimed: the database is unavailable (%s)", type(exc).__name__)
                else:
                    log.exception("could not claim a task")
                task = None
            if task is None:
                self.events.idle(self.poll_seconds)
                continue
            self._run(task)

    def _run(self, task: TaskRecord) -> None:
        kind = self.kinds[task.kind]
        error = ""
        if task.attempts <= kind.max_attempts:
            try:
                kind.run(self.runtimes.get(kind.name, self.runtime), task)
            except Exception as exc:  # noqa: BLE001 - retried, then given up
                error = f"{type(exc).__name__}: {exc}"
                log.exception("task %s (%s) attempt %d failed", task.id, task.kind, task.attempts)
        else:  # its last attempt's process died before settling it
            error = "the last attempt did not finish"
        metrics.TASKS.labels(task.kind, "failed" if error else "done").inc()
        try:
            with self.engine.begin() as conn:
                repo = TaskRepository(conn)
                if not error:
                    repo.finish(task.id, task.attempts, "done")
                elif task.attempts < kind.max_attempts:
                    repo.retry(task.id, task.attempts, timedelta(seconds=kind.backoff_seconds * 2 ** (task.attempts - 1)), error)
                else:
                    kind.give_up(self.runtimes.get(kind.name, self.runtime), task, error)
                    repo.finish(task.id, task.attempts, "failed", error)
        except Exception:  # noqa: BLE001 - the lease runs out and the task is taken again
            log.exception("could not settle task %s", task.id)
        self.events.settled()
