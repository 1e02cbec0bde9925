"""Durable tasks on the real database: a task exists exactly when the change
that enqueued it commits, runs once, is retried with backoff, is taken over
when its process died (lease), is given up after its last attempt, and one
organization's burst does not starve another's."""

from __future__ import annotations

import threading
import uuid

import pytest
from persona_service.kernel.data.tasks_repository import TaskRepository
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.tasks import TaskKind, TaskRunner, enqueue
from sqlalchemy import text


class Recorder:
    def __init__(self, fail_times: int = 0):
        self.ran: list[str] = []
        self.gave_up: list[tuple[str, str]] = []
        self.fail_times = fail_times
        self.lock = threading.Lock()

    def run(self, app, task) -> None:
        with self.lock:
            self.ran.append(task.subject_id)
            if self.fail_times > 0:
                self.fail_times -= 1
                raise RuntimeError("boom")

    def give_up(self, app, task, error: str) -> None:
        self.gave_up.append((task.subject_id, error))


def _kind(recorder: Recorder, **kw) -> TaskKind:
    return TaskKind(f"test.{uuid.uuid4().hex[:8]}", recorder.run, recorder.give_up, backoff_seconds=0, **kw)


def _status(engine, task_id: str) -> tuple[str, int]:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT status, attempts FROM tasks WHERE id = :i"), {"i": task_id}).one()
    return row.status, row.attempts


@pytest.fixture
def runner_for(engine):
    started: list[TaskRunner] = []

    def make(*kinds: TaskKind, workers: int = 1) -> TaskRunner:
        runner = TaskRunner(object(), engine, {k.name: k for k in kinds}, workers, poll_seconds=0.05)
        started.append(runner)
        return runner

    yield make
    for runner in started:
        runner.close()


def _settled(engine, task_id: str):
    return lambda: (status if (status := _status(engine, task_id)[0]) in ("done", "failed") else None)


def test_only_committed_tasks_run(engine, runner_for):
    recorder = Recorder()
    kind = _kind(recorder)
    with engine.connect() as conn:
        enqueue(Work.on(conn), kind.name, "org_tasks", "rolled-back")
        conn.rollback()
    with engine.begin() as conn:
        task_id = enqueue(Work.on(conn), kind.name, "org_tasks", "committed")
    runner = runner_for(kind)
    runner.start()
    assert runner.wait_until(_settled(engine, task_id), 10) == "done"
    assert recorder.ran == ["committed"]


def test_a_failing_task_is_retried_then_given_up(engine, runner_for):
    flaky, doomed = Recorder(fail_times=2), Recorder(fail_times=99)
    flaky_kind, doomed_kind = _kind(flaky, max_attempts=3), _kind(doomed, max_attempts=2)
    with engine.begin() as conn:
        flaky_id = enqueue(Work.on(conn), flaky_kind.name, "org_tasks", "flaky")
        doomed_id = enqueue(Work.on(conn), doomed_kind.name, "org_tasks", "doomed")
    runner = runner_for(flaky_kind, doomed_kind)
    runner.start()
    assert runner.wait_until(_settled(engine, flaky_id), 10) == "done"
    assert runner.wait_until(_settled(engine, doomed_id), 10) == "failed"
    assert _status(engine, flaky_id) == ("done", 3)
    assert _status(engine, doomed_id) == ("failed", 2)
    assert doomed.gave_up == [("doomed", "RuntimeError: boom")]


def test_a_task_whose_process_died_is_taken_over(engine, runner_for):
    recorder = Recorder()
    kind = _kind(recorder)
    with engine.begin() as conn:
        task_id = enqueue(Work.on(conn), kind.name, "org_tasks", "orphan")
        # Claimed by a process that died: running, its lease already over.
        claimed = TaskRepository(conn).claim({kind.name: -1})
        assert claimed is not None and claimed.id == task_id
    runner = runner_for(kind)
    runner.start()
    assert runner.wait_until(_settled(engine, task_id), 10) == "done"
    assert recorder.ran == ["orphan"] and _status(engine, task_id) == ("done", 2)


def test_a_busy_organization_does_not_starve_another(engine):
    kind = _kind(Recorder())
    with engine.begin() as conn:
        busy = [enqueue(Work.on(conn), kind.name, "org_busy", f"busy-{i}") for i in range(5)]
    with engine.begin() as conn:
        quiet = enqueue(Work.on(conn), kind.name, "org_quiet", "quiet")
    with engine.begin() as conn:
        first = TaskRepository(conn).claim({kind.name: 60})
    with engine.begin() as conn:
        second = TaskRepository(conn).claim({kind.name: 60})
    # The busy organization has one running now: the quiet one goes next, ahead of older busy tasks.
    assert first.id in busy and second.id == quiet


def test_a_paused_kind_is_left_to_other_processes(engine, runner_for):
    """A process handing its runs over (kernel.transport.runs) must not take them back: while
    a kind is paused its tasks stay queued (a claim would spend an attempt each round)."""
    paused, recorder, other = threading.Event(), Recorder(), Recorder()
    paused.set()
    kind, other_kind = _kind(recorder, paused=paused.is_set), _kind(other)
    with engine.begin() as conn:
        task_id = enqueue(Work.on(conn), kind.name, "org_tasks", "paused")
    with engine.begin() as conn:  # due later: an unpaused runner would claim the paused task first
        other_id = enqueue(Work.on(conn), other_kind.name, "org_tasks", "other")
    runner = runner_for(kind, other_kind)
    runner.start()
    assert runner.wait_until(_settled(engine, other_id), 10) == "done"  # the runner claims meanwhile
    assert _status(engine, task_id) == ("queued", 0) and recorder.ran == []
    paused.clear()
    assert runner.wait_until(_settled(engine, task_id), 10) == "done"


def test_a_lease_is_still_the_attempts_that_settled_it_and_no_one_elses(engine):
    """The runs' heartbeat abandons a run whose lease it could not renew. A run that has just committed its end
    (settled by its own attempt) is not lost: abandoning it then dropped its end frame, and its stream waited
    for a takeover that never came (a moderation-blocked creation's gRPC stream, in a fresh-clone run)."""
    with engine.begin() as conn:
        tasks = TaskRepository(conn)
        made = []
        for _ in range(4):
            made.append(task_id := f"renew_{uuid.uuid4().hex[:24]}")
            tasks.add_held(60, id=task_id, kind="renew.test", org_id="org_tasks", subject_id="s", payload={})
        running, settled, released, failed = made
        assert tasks.finish(settled, 1, "done") and tasks.finish(failed, 1, "failed")
        tasks.release(released, 1)
    with engine.begin() as conn:
        assert TaskRepository(conn).renew({t: 1 for t in made}, 60) == {running, settled, failed}
        assert TaskRepository(conn).renew({running: 2, settled: 2}, 60) == set()  # another attempt's
