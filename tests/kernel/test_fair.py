"""Fair shares (kernel.fair): organizations take turns for run workers and
for the model's CPU steps, weighted by plan; a newcomer is served next, not
after another organization's backlog."""

from __future__ import annotations

import threading
import time

from persona_service.kernel.fair import FairGate, FairPool, weight_of


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

