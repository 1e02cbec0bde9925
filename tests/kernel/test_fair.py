"""Fair shares (kernel.transport.fair): organizations take turns for run workers and
for the model's CPU steps, weighted by plan; a newcomer is served next, not
after another organization's backlog."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

import pytest
import redis
from google.protobuf import struct_pb2
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport import fair
from persona_service.kernel.transport.fair import FairExecutor, FairGate, FairPool, GateTimeout, weight_of
from persona_service.kernel.transport.runs import Run, RunOwner, Runs
from support import wait_until


def _run_in_pool(jobs: list[tuple[str, int]]) -> list[str]:
    """The order one worker runs `jobs` (org, weight), all queued behind a first job that waits."""
    pool, order, hold, done = FairPool(1, "test"), [], threading.Event(), threading.Event()
    pool.submit("first", 1, hold.wait)
    for org, weight in jobs:
        pool.submit(org, weight, lambda org=org: order.append(org))
    pool.submit("last", 1, done.set)
    hold.set()
    assert done.wait(10)
    pool.shutdown()
    return order


class _Gauge:
    def __init__(self) -> None:
        self.value = 0

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1


def test_the_queued_gauge_counts_work_waiting_for_a_busy_pool_until_it_starts():
    gauge, hold, done = _Gauge(), threading.Event(), threading.Event()
    pool = FairPool(1, "test", queued=gauge)
    pool.submit("first", 1, hold.wait)  # a thread was free: not counted
    assert gauge.value == 0
    # The pool counts the first job as running once its thread takes it; the next two then queue behind it.
    wait_until(lambda: pool._busy == 1, 10, "the first job taken")
    pool.submit("a", 1, lambda: None)
    pool.submit("b", 1, done.set)
    assert gauge.value == 2
    hold.set()
    assert done.wait(10)
    assert gauge.value == 0
    pool.shutdown()


def test_a_newcomer_runs_next_not_after_another_organizations_backlog():
    order = _run_in_pool([("hostile", weight_of("enterprise"))] * 50 + [("quiet", weight_of("pro"))])
    assert order.index("quiet") <= 1  # first-come-first-served ran it 51st


def test_waiting_organizations_share_by_plan_weight():
    jobs = [("enterprise", weight_of("enterprise")), ("free", weight_of("free"))] * 40
    first = _run_in_pool(jobs)[:27]
    assert 2 <= first.count("free") <= 4  # 8 turns to 1


def test_a_gate_hands_the_next_turn_to_the_organization_that_waited_least_served():
    gate, order = FairGate(1), []
    holder = gate.turn("hostile", 8)
    holder.__enter__()

    def take(org: str) -> None:
        with gate.turn(org, 8):
            order.append(org)

    hostile = [threading.Thread(target=take, args=("hostile",)) for _ in range(20)]
    for t in hostile:
        t.start()
    deadline = time.monotonic() + 10
    while sum(len(q) for q in gate._waiting._queues.values()) < 20:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    quiet = threading.Thread(target=take, args=("quiet",))
    quiet.start()
    while len(gate._waiting) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    holder.__exit__(None, None, None)
    for t in [*hostile, quiet]:
        t.join(10)
    assert len(order) == 21 and order.index("quiet") <= 1



def test_a_caller_waits_for_a_turn_no_longer_than_it_asked_and_its_turn_passes_on():
    gate = FairGate(1)
    gate.acquire("busy", 8)
    with pytest.raises(GateTimeout):
        gate.acquire("quiet", 1, wait=0.05)
    taken = threading.Event()
    later = threading.Thread(target=lambda: (gate.acquire("later", 1, wait=10), taken.set()))
    later.start()
    gate.release()  # skips the caller that gave up
    assert taken.wait(10)
    later.join(10)
    gate.release()
    gate.acquire("free", 1, wait=0)  # the slot is free again: no one holds it


def test_a_run_frame_is_serialized_and_kept_in_a_turn_of_the_process_gate():
    gate, unreachable = FairGate(1), redis.Redis(unix_socket_path="/nonexistent/redis.sock")
    runs, kept = Runs(unreachable, 1, None, 10), threading.Event()  # type: ignore[arg-type]
    run = Run("run_" + "0" * 32, RunOwner("org_other", "ws_1"), "/test")
    principal = Principal("api_key", "key_1", "org_other", "ws_1", "usr_1", frozenset(), "member", "pro", False)
    fair.install(gate)
    try:
        def emit() -> None:  # the caller's turn is handed to the run, never read from a request context
            runs.emit(run, struct_pb2.Value(string_value="frame"), turn=fair.turn_of(principal))
            kept.set()

        with gate.turn("org_busy", 8):  # another organization's step holds the CPU
            threading.Thread(target=emit).start()
            assert not kept.wait(0.2)
        assert kept.wait(10)
        assert run.frames == [struct_pb2.Value(string_value="frame").SerializeToString()]
    finally:
        fair.install(None)  # type: ignore[arg-type]


def _blocking_pool(workers: int) -> tuple[FairPool, queue.Queue[str], Callable[[str], threading.Event]]:
    """A pool whose jobs report their organization when they start, then run until their event is set."""
    pool, started = FairPool(workers, "test"), queue.Queue[str]()

    def submit(org: str) -> threading.Event:
        finish = threading.Event()
        pool.submit(org, 1, lambda: (started.put(org), finish.wait(10)))
        return finish

    return pool, started, submit


def test_an_organization_holding_every_run_worker_gets_no_more_than_its_share_while_another_waits():
    pool, started, submit = _blocking_pool(4)
    hostile = [submit("hostile") for _ in range(4)]  # alone, it gets every worker
    assert [started.get(timeout=10) for _ in range(4)] == ["hostile"] * 4
    later = [submit("hostile") for _ in range(6)] + [submit("quiet") for _ in range(6)]
    order = []
    for finish in hostile:  # its runs end one by one: each frees one worker
        finish.set()
        order.append(started.get(timeout=10))
    assert order == ["quiet", "quiet", "hostile", "hostile"]  # turns alone gave hostile the second (its 3 of 4)
    for finish in later:
        finish.set()
    pool.shutdown()


def test_organizations_waiting_at_the_unary_gate_bound_another_organizations_run_workers_until_served():
    gate = FairGate(1)
    gate.acquire("busy", 8)
    waiter = threading.Thread(target=lambda: (gate.acquire("quiet", weight_of("pro")), gate.release()))
    waiter.start()
    deadline = time.monotonic() + 10
    while gate.waiting() != {"quiet": weight_of("pro")}:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pool, started, submit = _blocking_pool(4)
    pool.share_with(gate.waiting)
    runs = [submit("hostile") for _ in range(4)]  # weight 1 to the waiting Pro org's 2: 4 × 1/3 workers
    assert [started.get(timeout=10) for _ in range(2)] == ["hostile"] * 2
    with pytest.raises(queue.Empty):
        started.get(timeout=0.2)  # the other two wait while quiet does
    gate.release()  # quiet is served: hostile is alone again and gets every worker (work-conserving)
    waiter.join(10)
    assert [started.get(timeout=10) for _ in range(2)] == ["hostile"] * 2
    for finish in runs:
        finish.set()
    pool.shutdown()


class _Event:
    """What grpcio hands the executor with each call: its event, carrying the call's metadata."""

    def __init__(self, authorization: str) -> None:
        self.invocation_metadata = (("user-agent", "test"), ("authorization", authorization))


def test_unary_calls_wait_in_their_organizations_queue_on_no_thread_of_their_own():
    executor = FairExecutor(2, "rpc-test")  # its own threads are named rpc-test-<n>
    executor.learn("Bearer busy", "busy", weight_of("enterprise"))
    executor.learn("Bearer quiet", "quiet", weight_of("pro"))
    hold, started, order = threading.Event(), queue.Queue(), queue.Queue()

    def call(who: str, _event: _Event) -> str:
        started.put(who)
        hold.wait(10)
        order.put(who)
        return who

    calls = [executor.submit(call, "busy", _Event("Bearer busy")) for _ in range(2)]
    assert [started.get(timeout=10) for _ in range(2)] == ["busy", "busy"]  # busy holds both workers
    calls += [executor.submit(call, "busy", _Event("Bearer busy")) for _ in range(38)]
    calls.append(executor.submit(call, "quiet", _Event("Bearer quiet")))
    # The workers only: the 39 waiting calls hold no thread.
    assert len([t for t in threading.enumerate() if t.name.startswith("rpc-test")]) == 2
    assert executor.waiting() == {"busy": weight_of("enterprise"), "quiet": weight_of("pro")}
    hold.set()
    assert [c.result(timeout=10) for c in calls][-1] == "quiet"
    served = [order.get(timeout=10) for _ in range(41)]
    assert served.index("quiet") <= 3  # a worker coming free after busy's two, not after its 38 queued
    executor.shutdown()


def test_a_call_from_a_credential_not_yet_authenticated_queues_apart_and_its_failure_reaches_grpc():
    executor = FairExecutor(1, "rpc-test")
    assert executor.tenant(_Event("Bearer new").invocation_metadata) == fair.UNKNOWN_TENANT
    failed = executor.submit(lambda _event: 1 / 0, _Event("Bearer new"))
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=10)
    executor.shutdown()
