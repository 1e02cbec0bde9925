"""The runner process (`persona-service runner`): where the model's work runs.

Server processes accept streamed calls (a run's row, kernel.transport.runs) and serve their views; runners run them,
and answer every call of the model the servers make (providers.remote), and run the durable tasks
(portraits, exports) and the periodic jobs. A runner claims a new run as soon as it is accepted: it LISTENs
for the notification the accepting transaction sends (`RUNS_CHANNEL`), and polls every `task_poll_seconds`
only as a safety net (a notification missed while its connection was down; a lease that ran out). The runs
it holds wait for its run threads in one queue per organization, served in turns weighted by plan
(kernel.transport.fair), and their model steps take turns of the process's gate. A runner that dies loses nothing:
its leases run out and another runner takes its runs over from their saved state (kernel.transport.runs).

Runners lower their own CPU priority (`runner_priority`: SCHED_IDLE by default, else `runner_nice`) so that
on a shared machine the servers' unary calls and stream views go first.
"""

from __future__ import annotations

import gc
import logging
import os
import pathlib
import signal
import threading
import time
from typing import TYPE_CHECKING

from persona_service.kernel import logs, tracing
from persona_service.kernel import settings as config
from persona_service.kernel.data.notifications_repository import listening
from persona_service.kernel.data.outages import connection_lost
from persona_service.kernel.data.tasks_repository import TaskRecord, TaskRepository
from persona_service.kernel.logs import Throttled
from persona_service.kernel.transport.fair import FairPool
from persona_service.kernel.transport.pipeline import RequestPipeline
from persona_service.kernel.transport.policy import find_services, method_table
from persona_service.kernel.transport.runs import RUN_ATTEMPTS, RUNS_CHANNEL, Outcome, Run, RunRow, Runs
from persona_service.kernel.transport.tasks import TASKS_CHANNEL, TaskRunner
from persona_service.process.app import App
from persona_service.providers.remote import ModelCallServer

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy import Engine

    from persona_service.kernel.module import Modules
    from persona_service.kernel.resources import Runtime

log = logging.getLogger("persona_service.runner")
_warn = Throttled(log)

# Set by `up` (process.stack): the runner creates this file once it takes work (its readiness).
READY_FILE_ENV = "PERSONA_RUNNER_READY_FILE"
LISTEN_RETRY_SECONDS = 1.0


class RunClaimer:
    """Claims runs for this process's run threads: at once on a notification, else every `poll_seconds`.
    It holds at most twice as many runs as it has threads: the ones waiting let organizations take turns
    (their leases renewed meanwhile), and the rest stay claimable by other runners."""

    def __init__(self, runs: Runs, engine: Engine, tasks: TaskRunner[Runtime], workers: int,
                 poll_seconds: float) -> None:
        self.runs = runs
        self.engine = engine
        self.tasks = tasks
        self.pool = FairPool(workers, "run")
        self.capacity = 2 * workers
        self.poll_seconds = poll_seconds
        self._held = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self.listening = threading.Event()  # LISTEN is in place (a run accepted from now on wakes this runner)

    def start(self) -> None:
        threading.Thread(target=self._listen, name="run-notifications", daemon=True).start()
        threading.Thread(target=self._claim_loop, name="run-claims", daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        self.pool.shutdown()

    def _claim_loop(self) -> None:
        while not self._closing.is_set():
            self._wake.clear()  # a notification from now on means another look
            full = self._claim_all()
            self._wake.wait(None if full else self.poll_seconds)

    def _claim_all(self) -> bool:
        """Claim due runs while there is room; True when it stopped for lack of room."""
        lease = {self.runs.kind: self.runs.lease_seconds}
        while True:
            with self._lock:
                if self._held >= self.capacity:
                    return True
            if self.runs.task_kind().paused():
                return False
            try:
                with self.engine.begin() as conn:
                    task = TaskRepository(conn).claim(lease)
            except Exception as exc:  # noqa: BLE001 - the database is away: the next poll tries again
                _warn.warning("claim", "runs not claimed: %s", type(exc).__name__)
                return False
            if task is None:
                return False
            self._take(task)

    def _take(self, task: TaskRecord) -> None:
        if task.attempts > RUN_ATTEMPTS:  # its last attempt's process died before settling it
            self.runs.lose(task)
            return
        adopted = self.runs.adopt(task)
        if adopted is None:
            return
        with self._lock:
            self._held += 1
        self.pool.submit(task.org_id, RunRow.of(task).weight, lambda: self._run(*adopted))

    def _run(self, run: Run, produce: Callable[[Run], Outcome]) -> None:
        try:
            self.runs.execute(run, produce)
        finally:
            with self._lock:
                self._held -= 1
            self._wake.set()  # room for another

    def _listen(self) -> None:
        """LISTEN on a connection of its own (out of the pool); wake the claims (runs) or the task threads."""
        while not self._closing.is_set():
            try:
                with listening(self.engine, (RUNS_CHANNEL, TASKS_CHANNEL)) as conn:
                    self.listening.set()
                    self._wake.set()  # what was accepted while it was not listening
                    self.tasks.wake()
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=1.0):
                            if note.channel == RUNS_CHANNEL:
                                self._wake.set()
                            else:
                                self.tasks.wake()
            except Exception as exc:  # noqa: BLE001 - PostgreSQL away: retried; the poll covers the gap
                self.listening.clear()
                if connection_lost(exc):
                    self.engine.dispose(close=False)
                _warn.warning("listen", "run notifications unavailable (%s); claims poll meanwhile",
                              type(exc).__name__)
                self._closing.wait(LISTEN_RETRY_SECONDS)


class LazyServicers(dict[str, object]):
    """A runner's servicers, each built when a run of its service is first revived: a module that
    declares its servicer as a function importing it (scim's) is not imported by runners that never
    run its RPCs (docs/testing.md). Two threads building one at once build it twice, harmlessly."""

    def __init__(self, app: App) -> None:
        super().__init__()
        self._app = app
        self._bindings = {binding.name: binding for binding in app.modules.services}

    def __missing__(self, service: str) -> object:
        servicer = self._bindings[service].servicer(self._app.servicer_deps_for(service))
        return self.setdefault(service, servicer)


def revival_pipeline(app: App) -> RequestPipeline:
    """The request pipeline a runner runs accepted runs through (no gRPC server: `revive` only)."""
    pipeline = RequestPipeline(app, method_table(find_services(app.modules.service_names)), engine=app.stream_engine)
    pipeline.servicers = LazyServicers(app)
    return pipeline


def lower_priority(priority: str, nice: int) -> None:
    """Yield the CPU to the servers: SCHED_IDLE (`idle`, Linux), every thread the process has so far (those it
    starts later inherit it), else `nice` steps of os.nice. Under SCHED_IDLE a runner still gets any CPU time
    nothing else wants, so its runs go on (slower when the machine is busy) and its leases are renewed."""
    if priority == "idle" and hasattr(os, "SCHED_IDLE"):
        for thread in os.listdir("/proc/self/task"):
            os.sched_setscheduler(int(thread), os.SCHED_IDLE, os.sched_param(0))
        return
    if nice > 0:
        os.nice(nice)


def run(modules: Modules) -> None:
    settings = config.load()
    logs.configure(settings.log_level, settings.log_format)
    lower_priority(settings.runner_priority, settings.runner_nice)  # servers first on a shared machine
    app = App(settings, modules, role="runner")
    tracing.configure("persona-service-runner", settings.otlp_endpoint, [app.engine, app.stream_engine])
    app.runs.revive = revival_pipeline(app).revive
    claimer = RunClaimer(app.runs, app.engine, app.tasks, settings.run_workers, settings.task_poll_seconds)
    models = ModelCallServer(app.provider, app.redis, settings.grpc_workers, app.pool)
    app.start_background()
    claimer.start()
    models.start()
    claimer.listening.wait(10)
    gc.collect()
    gc.freeze()  # as a server does (process.server): startup's objects leave the collector's view
    ready = os.environ.get(READY_FILE_ENV)
    if ready:
        pathlib.Path(ready).write_text(str(os.getpid()))
    log.info("runner %d taking runs, tasks and model calls", os.getpid())
    received: list[int] = []  # handlers that take no lock (see process.server)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _: received.append(signum))
    while not received:  # never an unbounded wait (see process.server)
        time.sleep(0.1)
    app.runs.hand_over()  # other runners go on with this one's runs from their saved state
    claimer.close()
    models.close()
    app.close()
    tracing.shutdown()
