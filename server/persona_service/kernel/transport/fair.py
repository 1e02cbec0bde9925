"""Fair shares of a server process between organizations.

A process's run workers and its CPU (one GIL) are shared by every
organization; first come, first served let one organization's in-limit
burst (hundreds of generating streams) queue everyone else behind it. Here
work waits in one queue per organization and the next turn goes to the
waiting organization that has had the fewest turns for its weight (stride
scheduling: each turn advances the organization's virtual time by
1/weight). An organization alone gets every turn; with others waiting it
gets its weighted share, and a newcomer is served next, never after a
backlog it did not make. Weights follow the plan (`SHARE_WEIGHTS`).

`FairPool` runs queued functions on a fixed set of threads (durable runs),
and since a run holds its thread for its whole length, turns alone would let
an organization's 200 streams keep every thread: while other organizations
wait (for a thread, or for the process's unary workers) a thread goes only
to an organization below its weighted share of the threads running;
`FairGate` lets at most `slots` callers hold a turn at once: the process's
gate (`install`) times the model work of requests (the local provider's
completions, stream steps, souls, voices, moderation, each in the turn its
`ModelCall` holds: `turn_for` the caller's organization) and each run frame's
serialization, one step at a time, so a burst of generations never holds
more of the CPU than one step. A turn is for CPU work only: held across a
wait on another request (a row lock, a pool), it deadlocks with that request
waiting for a turn.

`FairExecutor` is the unary server's executor: gRPC hands it each call, and
the call waits in its organization's queue as a queued function (no thread
of its own; a parked thread per waiting call cost a fifth of the hot read's
CPU in context switches) until one of the server's workers takes it in turns.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Generic, ParamSpec, Protocol, TypeVar

from persona_service.kernel.principal import Principal

# Turns per round, by plan: an Enterprise organization with others waiting gets 8 turns to a Free one's 1.
SHARE_WEIGHTS = {"free": 1, "pro": 2, "team": 4, "enterprise": 8}
# A turn of the process's gate, handed to whoever does CPU work for a caller (`turn_of`, a `ModelCall`'s turn).
Turn = Callable[[], AbstractContextManager[object]]

T = TypeVar("T")
P = ParamSpec("P")
# How soon a pool thread holding work back for organizations waiting elsewhere looks again (they may have been served).
SHARE_RECHECK_SECONDS = 0.02
_END = object()
_installed: FairGate | None = None
_holding = threading.local()  # a thread holding a turn takes no second one (turns never nest)


def weight_of(plan: str) -> int:
    return SHARE_WEIGHTS.get(plan, 1)


class _Stride(Generic[T]):
    """Per-organization FIFO queues, served by lowest virtual time (not thread-safe: callers lock)."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[tuple[float, T]]] = {}
        self._passes: dict[str, float] = {}  # organizations' virtual times (idle ones until the clock passes them)
        self._clock = 0.0  # virtual time of the last turn given

    def __len__(self) -> int:
        return len(self._queues)

    def weights(self) -> dict[str, int]:
        """The waiting organizations, with their weights."""
        return {org: round(1 / queue[0][0]) for org, queue in self._queues.items()}

    def push(self, org: str, weight: int, item: T) -> None:
        queue = self._queues.get(org)
        if queue is None:
            # An organization that was idle starts at the current virtual time: no credit saved up, no debt.
            queue = self._queues[org] = deque()
            self._passes[org] = max(self._passes.get(org, 0.0), self._clock)
        queue.append((1.0 / max(1, weight), item))

    def pop(self, allowed: Callable[[str], bool] | None = None) -> T | None:
        """The next item of the waiting organization with the lowest virtual time (among the `allowed` ones)."""
        waiting = [org for org in self._queues if allowed(org)] if allowed is not None else self._queues
        if not waiting:
            return None
        org = min(waiting, key=self._passes.__getitem__)
        queue = self._queues[org]
        stride, item = queue.popleft()
        self._clock = self._passes[org]
        self._passes[org] += stride
        if not queue:
            del self._queues[org]
            if len(self._passes) > 2 * len(self._queues) + 64:  # idle organizations the clock caught up with
                self._passes = {o: p for o, p in self._passes.items() if o in self._queues or p > self._clock}
        return item


class Gauge(Protocol):
    """What counts a pool's queued functions (a prometheus Gauge: kernel.metrics)."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class FairPool:
    """`workers` threads running submitted functions, organizations taking turns.
    While other organizations wait (here or at `share_with`'s source) a free
    thread goes only to an organization running fewer than its weighted share
    of the threads; one waiting alone gets every thread (work-conserving).
    `queued` (a gauge) counts the functions submitted while every thread was
    busy until they start: observable, and nothing written on the quiet path."""

    def __init__(self, workers: int, name: str, queued: Gauge | None = None):
        self._workers, self._name, self._queued = workers, name, queued
        self._pending: _Stride[tuple[str, Callable[[], None]]] = _Stride()
        self._running: dict[str, int] = {}  # functions running, by organization
        self._busy = 0  # functions running, in all
        self._elsewhere: Callable[[], dict[str, int]] = dict  # organizations waiting for other work of the process
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def share_with(self, waiting: Callable[[], dict[str, int]]) -> None:
        """Count the organizations `waiting()` names (with their weights) as waiting too (the unary executor's)."""
        self._elsewhere = waiting

    def waiting(self) -> dict[str, int]:
        """The organizations with work queued here, with their weights."""
        with self._ready:
            return self._pending.weights()

    def submit(self, org: str, weight: int, fn: Callable[[], None]) -> None:
        with self._ready:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            if self._queued is not None and self._busy >= self._workers:
                fn = self._counted(fn, self._queued)
            self._pending.push(org, weight, (org, fn))
            if len(self._threads) < self._workers:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._ready.notify()

    def _work(self) -> None:
        while True:
            with self._ready:
                job = self._next()
                while job is None:
                    if self._closed and not len(self._pending):
                        return
                    # Work held back for others waiting elsewhere: look again soon (they are not counted here).
                    self._ready.wait(SHARE_RECHECK_SECONDS if len(self._pending) else None)
                    job = self._next()
            org, fn = job
            try:
                fn()  # the caller's function handles its own errors
            finally:
                with self._ready:
                    self._busy -= 1
                    self._running[org] -= 1
                    if not self._running[org]:
                        del self._running[org]
                    self._ready.notify()

    def _next(self) -> tuple[str, Callable[[], None]] | None:
        """The next function to run, counted as running (under `_ready`)."""
        waiting = self._pending.weights() if self._closed else {**self._elsewhere(), **self._pending.weights()}
        total = sum(waiting.values())

        def below_share(org: str) -> bool:
            alone = total == waiting[org]
            return alone or self._running.get(org, 0) < self._workers * waiting[org] / total

        job = self._pending.pop(below_share)
        if job is not None:
            self._busy += 1
            self._running[job[0]] = self._running.get(job[0], 0) + 1
        return job

    def _counted(self, fn: Callable[[], None], gauge: Gauge) -> Callable[[], None]:
        """`fn`, counted in the `queued` gauge until it starts."""
        gauge.inc()

        def run() -> None:
            gauge.dec()
            fn()
        return run

    def shutdown(self) -> None:
        """Take no more work; what is queued still runs."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()


# Calls whose credential the server has not authenticated yet share one queue (they are few: a credential's
# first call, or failing ones, which the per-address limits bound).
UNKNOWN_TENANT = ("", 1)
# Credentials remembered for classifying calls; beyond this many the memo starts over (each is relearned on its call).
KNOWN_CREDENTIALS = 4096


class FairExecutor(futures.ThreadPoolExecutor):  # what grpc.server takes; none of its own threads ever start
    """gRPC's executor for the unary server: each call queued by its
    organization (`FairPool`), classified at submission from its
    `authorization` header against the credentials the pipeline authenticated
    (`learn`). The memo is keyed by the header's `hash()`, never the secret: a
    collision only lends a call another organization's place in the turns."""

    def __init__(self, workers: int, name: str, queued: Gauge | None = None):
        super().__init__(max_workers=workers, thread_name_prefix=name)
        self._pool = FairPool(workers, name, queued)
        self._tenants: dict[int, tuple[str, int]] = {}

    def learn(self, authorization: str | None, org: str, weight: int) -> None:
        """The organization (and plan weight) that calls with this `authorization` header queue as."""
        key = hash(authorization)
        if self._tenants.get(key) != (org, weight):
            if len(self._tenants) >= KNOWN_CREDENTIALS:
                self._tenants = {}
            self._tenants[key] = (org, weight)

    def tenant(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[str, int]:
        for name, value in metadata or ():
            if name == "authorization":
                return self._tenants.get(hash(value), UNKNOWN_TENANT)
        return UNKNOWN_TENANT

    def waiting(self) -> dict[str, int]:
        return self._pool.waiting()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> futures.Future[T]:
        # grpcio submits `(context.run, handler, rpc_event, ...)`: the call's metadata is on its event.
        metadata = next((a.invocation_metadata for a in args if hasattr(a, "invocation_metadata")), None)
        org, weight = self.tenant(metadata)
        future: futures.Future[T] = futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the future, as ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)

        self._pool.submit(org, weight, run)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown()
        super().shutdown(wait, cancel_futures=cancel_futures)


class GateTimeout(Exception):
    """No turn came within the caller's `wait`."""


class FairGate:
    """At most `slots` turns held at once; waiting organizations take turns.
    A caller with nobody waiting ahead takes a free slot at once (no hand-off)."""

    def __init__(self, slots: int):
        self._slots = slots
        self._held = 0
        self._waiting: _Stride[threading.Event] = _Stride()
        self._gave_up: set[threading.Event] = set()  # waiters that left the queue before their turn
        self._lock = threading.Lock()

    @contextmanager
    def turn(self, org: str, weight: int, wait: float | None = None) -> Iterator[None]:
        self.acquire(org, weight, wait)
        try:
            yield
        finally:
            self.release()

    def acquire(self, org: str, weight: int, wait: float | None = None) -> None:
        """Take a turn, waiting `wait` seconds at most (None: for ever), else GateTimeout."""
        with self._lock:
            if self._held < self._slots and not len(self._waiting):
                self._held += 1
                return
            granted = threading.Event()
            self._waiting.push(org, weight, granted)
        if granted.wait(wait):
            return  # release handed its turn over: _held already counts this one
        with self._lock:
            if not granted.is_set():  # still queued: its turn, when it comes, passes on
                self._gave_up.add(granted)
                raise GateTimeout()

    def waiting(self) -> dict[str, int]:
        """The organizations waiting for a turn, with their weights (for `FairPool.share_with`)."""
        with self._lock:
            return self._waiting.weights()

    def release(self) -> None:
        with self._lock:
            following = self._waiting.pop()
            while following is not None and following in self._gave_up:
                self._gave_up.discard(following)
                following = self._waiting.pop()
            if following is None:
                self._held -= 1
            else:
                following.set()  # under the lock: a waiter timing out sees it granted or gives up, never both


def install(gate: FairGate) -> None:
    """The process's gate for model work (App, at start)."""
    global _installed
    _installed = gate


def turn_of(principal: Principal | None) -> Turn:
    """A turn of the process's gate for `principal`'s organization at its plan's weight, to take when it does
    CPU work (a model step, a run frame's serialization); nobody's turn (nothing to wait for) without one."""
    if principal is None:
        return nullcontext
    return functools.partial(turn_for, principal.org_id, weight_of(principal.plan))


@contextmanager
def turn_for(org: str, weight: int) -> Iterator[None]:
    """A turn of the process's gate for `org` (a runner's model call, outside any request); nothing to wait
    for when no gate is installed or this thread already holds one."""
    gate = _installed
    if gate is None or getattr(_holding, "turn", False):
        yield
        return
    with gate.turn(org, weight):
        _holding.turn = True
        try:
            yield
        finally:
            _holding.turn = False
