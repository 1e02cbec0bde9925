"""Keep the stack's processes running: a child that exits without being
asked to is restarted with capped exponential backoff, and every exit and
restart is logged. Used by `persona-service up` (and so by the tests)."""

from __future__ import annotations

import logging
import pathlib
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from persona_service.process.placement import pin
from persona_service.process.template import Template

log = logging.getLogger("persona_service.supervisor")

FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0
# A child that ran this long before exiting is restarted from the first backoff again.
STABLE_SECONDS = 60.0


class ChildProcess(Protocol):
    """What the supervisor and the stack hold of a started child: a `subprocess.Popen`, or the handle of a
    child forked by a process template (process.template)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


@dataclass
class Child:
    name: str  # "server-50051", "webhook-worker-0", "envoy"
    argv: list[str]
    env: dict[str, str]
    log_path: pathlib.Path
    # Blocks until the process is ready, or raises (e.g. StackError).
    ready: Callable[[ChildProcess], None] | None = None
    # The cores it may run on (process.placement), applied at each (re)start; None: every core.
    cpus: set[int] | None = None
    proc: ChildProcess | None = None
    restarts: int = 0
    backoff: float = FIRST_BACKOFF
    started_at: float = 0.0
    restart_at: float | None = field(default=None)


class Supervisor:
    def __init__(self, on_change: Callable[[], None] | None = None, template: Template | None = None):
        # Where children are forked from when it can (process.template): the test suite's stacks.
        self._template = template
        self._children: dict[str, Child] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        # Called after each (re)start, e.g. to record pids for the reaper.
        self._on_change = on_change or (lambda: None)

    # --- children -----------------------------------------------------------------

    def start(self, child: Child) -> ChildProcess:
        """Start a child and wait until it is ready; from then on it is watched."""
        with self._lock:
            self._children[child.name] = child
        return self._spawn(child)

    def start_together(self, children: list[Child]) -> None:
        """Start children at once, then wait until each is ready: their imports and
        connections overlap instead of queueing one behind another."""
        with self._lock:
            self._children.update((child.name, child) for child in children)
        for child in children:
            self._launch(child)
        for child in children:
            if child.ready is not None and child.proc is not None:
                child.ready(child.proc)

    def remove(self, name: str) -> Child | None:
        """Stop watching a child (it is not restarted); the caller stops it."""
        with self._lock:
            return self._children.pop(name, None)

    def pids(self) -> list[int]:
        with self._lock:
            return [c.proc.pid for c in self._children.values() if c.proc is not None and c.proc.poll() is None]

    def children(self) -> list[Child]:
        with self._lock:
            return list(self._children.values())

    def _spawn(self, child: Child) -> ChildProcess:
        proc = self._launch(child)
        if child.ready is not None:
            child.ready(proc)
        return proc

    def _launch(self, child: Child) -> ChildProcess:
        child.proc = self._fork(child) or self._popen(child)
        child.started_at = time.monotonic()
        self._on_change()
        return child.proc

    def _popen(self, child: Child) -> ChildProcess:
        with open(child.log_path, "ab") as out:
            proc = subprocess.Popen(
                child.argv, env=child.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                # Own session: a terminal's SIGHUP/SIGINT reaches `up` only, which stops everything in order.
                start_new_session=True,
            )
        if child.cpus is not None:  # at once: before it starts any thread of its own
            pin(proc.pid, child.cpus)
        return proc

    def _fork(self, child: Child) -> ChildProcess | None:
        """The child forked from the template (which sets its session, log and cores), where it can be."""
        if self._template is None or not self._template.can_fork(child.argv, child.env):
            return None
        try:
            return self._template.spawn(child.argv, child.env, child.log_path, child.cpus)
        except OSError as exc:  # the template is gone: a fresh interpreter, as without one
            log.warning("%s not forked from the process template (%s); starting it afresh", child.name, exc)
            return None

    # --- watching -------------------------------------------------------------------

    def watch(self, interval: float = 0.2) -> None:
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="supervisor", daemon=True)
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stopping.wait(interval):
            for child in self.children():
                try:
                    self._check(child)
                except Exception:  # noqa: BLE001 - keep supervising the others
                    log.exception("supervising %s failed", child.name)

    def _check(self, child: Child) -> None:
        proc = child.proc
        if proc is None or proc.poll() is None or self._stopping.is_set():
            return
        now = time.monotonic()
        if child.restart_at is None:
            if now - child.started_at >= STABLE_SECONDS:
                child.backoff = FIRST_BACKOFF
            child.restart_at = now + child.backoff
            log.warning("%s exited with %s; restarting in %.1fs (see %s)", child.name, proc.returncode,
                        child.backoff, child.log_path)
            child.backoff = min(MAX_BACKOFF, child.backoff * 2)
            return
        if now < child.restart_at:
            return
        child.restart_at = None
        try:
            self._spawn(child)
            # Counted once the replacement runs: whoever sees the count sees the new process.
            child.restarts += 1
            log.warning("%s restarted (restart #%d, pid %d)", child.name, child.restarts, child.proc.pid if child.proc else 0)
        except Exception as exc:  # noqa: BLE001 - not ready: it will be seen exited or be retried
            log.warning("%s did not come back: %s", child.name, exc)

    def stop(self) -> None:
        """Stop restarting (before the children are stopped)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
