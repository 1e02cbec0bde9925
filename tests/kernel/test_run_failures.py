"""Durable runs when something fails (kernel.transport.runs), on the session stack's PostgreSQL and Redis:
Redis away (reads answer nothing or a retryable 503; refused batches are written in order once it answers,
or dropped once the runs' keys would be gone), an operation that raises, a resume its caller may not read,
a run that ended while the database was away, a run no attempt finished, a drain, a run whose acceptance's
COMMIT went unanswered."""

from __future__ import annotations

import time
import uuid
from contextlib import nullcontext

import pytest
import redis
from google.protobuf import struct_pb2
from persona_service.kernel.data.tasks_repository import TaskRepository
from persona_service.kernel.errors import NotFound, ServiceUnavailable
from persona_service.kernel.transport.runs import LIVE_TTL, Outcome, ResumePoint, Run, RunOwner, Runs, RunStore
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy.exc import OperationalError
from support import commit_unanswered, wait_until

METHOD = "/persona.v1.Test/Stream"
NOBODY = RunOwner("org_nobody", "ws_nobody")


def _away() -> redis.Redis:
    """A Redis that is not there. Tried once: redis-py's default retry (10 tries, backing off) spends about 4 s
    on each call to a socket that does not exist, and these tests are about what the runs do once a call fails."""
    return redis.Redis(unix_socket_path="/nonexistent/redis.sock", retry=Retry(NoBackoff(), 0))


def _frame(text: str) -> struct_pb2.Value:
    return struct_pb2.Value(string_value=text)


@pytest.fixture
def owner(tenants) -> RunOwner:
    tenant = tenants()
    return RunOwner(tenant.org_id, tenant.workspace_id)


@pytest.fixture
def runs(stack, engine):
    """A process's runs, of a pool of the test's own: the stack's runner, and other tests, never claim its rows."""
    made = Runs(redis.Redis.from_url(stack.redis_url), 2, engine, lease_seconds=10, outage_seconds=1,
                pool=f"tests-{uuid.uuid4().hex[:8]}")
    yield made
    made.close()


def _row(engine, run_id: str):
    with engine.connect() as conn:
        return TaskRepository(conn).get(run_id)


def _claimed(runs: Runs, engine, run: Run):
    """`run`'s row, claimed as a runner claims it (attempt 1)."""
    with engine.begin() as conn:
        task = TaskRepository(conn).claim({runs.kind: runs.lease_seconds})
    assert task is not None and task.id == run.id
    return task


def _read(frames) -> list[int]:
    return [seq for batch in frames for seq, _frame in batch]


def test_reads_with_redis_away_answer_nothing_or_a_retryable_503():
    store = RunStore(_away())
    assert (store.kept("run_x"), store.known("run_x"), store.ended("run_x")) == (0, False, None)
    for read in (lambda: store.meta("run_x"), lambda: store.frames("run_x", 0)):
        with pytest.raises(ServiceUnavailable) as caught:
            read()
        assert caught.value.headers == {"retry-after": "1"}


def test_batches_redis_refused_are_written_in_order_before_what_follows_once_it_answers(stack):
    client = redis.Redis.from_url(stack.redis_url)
    store, run, told = RunStore(_away()), Run("run_" + uuid.uuid4().hex, NOBODY, METHOD), []
    try:
        for seq in (1, 2, 3):
            store.append(run.id, seq, f"frame {seq}".encode(), told.append)
        store.flush()  # refused: kept for later, and told (a view does not wait for Redis)
        assert told and told[-1] == 3
        store.redis = client  # Redis answers again
        store.append(run.id, 4, b"frame 4")
        store.finish(run, "completed")
        assert store.frames(run.id, 0) == [f"frame {seq}".encode() for seq in (1, 2, 3, 4)]
        assert store.ended(run.id) == "completed"
    finally:
        client.close()


def test_batches_refused_for_as_long_as_a_runs_keys_live_are_dropped():
    store, run_id = RunStore(_away()), "run_" + uuid.uuid4().hex
    store.append(run_id, 1, b"frame 1")
    store._refused_since = time.monotonic() - LIVE_TTL  # refused that long already
    store.flush()
    wait_until(lambda: not store._pending and store._refused_since is None, 30, "the batch dropped")


def test_an_operation_that_raises_fails_its_run_and_a_resume_says_so(runs, engine, owner):
    def produce(run: Run) -> Outcome:
        runs.emit(run, _frame("first"), turn=nullcontext)
        raise RuntimeError("a bug in the operation")

    run = runs.start(owner, METHOD, produce)
    wait_until(lambda: run.outcome is not None, 30, "the run ended")
    assert run.outcome == Outcome("failed")
    assert _row(engine, run.id).status == "failed"
    frames, outcome = runs.resume(ResumePoint(run.id, 0), owner, METHOD, lambda: True)
    assert _read(frames) == [1]
    assert outcome() == Outcome("failed")


def test_a_resume_answers_not_found_for_a_run_its_caller_may_not_read_or_nobody_ran(runs, owner):
    run = runs.start(owner, METHOD, lambda run: Outcome("failed"))
    wait_until(lambda: run.outcome is not None, 30, "the run ended")
    for point, caller, method in ((ResumePoint(run.id, 0), NOBODY, METHOD),  # another organization's
                                  (ResumePoint(run.id, 0), owner, "/persona.v1.Test/Other"),  # another method's
                                  (ResumePoint("run_" + uuid.uuid4().hex, 0), owner, METHOD)):  # none
        with pytest.raises(NotFound):
            runs.resume(point, caller, method, lambda: True)


def test_a_view_with_redis_away_waits_for_it_then_answers_a_retryable_503(engine, owner):
    away = Runs(_away(), 1, engine, lease_seconds=10, outage_seconds=0.5)
    run = Run("run_" + uuid.uuid4().hex, owner, METHOD)  # accepted for a runner: its frames come through Redis
    frames, _ = away.follow(run, 0, lambda: True)
    with pytest.raises(ServiceUnavailable):
        list(frames)


def test_a_run_no_attempt_finished_ends_lost(runs, engine, owner):
    run = runs.submit(owner, METHOD)
    runs.lose(_claimed(runs, engine, run))  # its last attempt gave up
    assert runs.store.ended(run.id) == "lost"
    assert _row(engine, run.id).status == "failed"


def test_a_run_that_ended_while_the_database_was_away_is_settled_not_run_again(runs, engine, owner):
    revived: list[dict] = []
    runs.revive = lambda payload: revived.append(payload) or (lambda run: Outcome("completed"))
    run = runs.submit(owner, METHOD)
    task = _claimed(runs, engine, run)
    runs.store.finish(run, "failed")  # its process told Redis, and could not tell the database
    assert runs.adopt(task) is None
    assert revived == [] and _row(engine, run.id).status == "failed"


def test_a_draining_process_gives_its_runs_back_and_adopts_none(runs, engine, owner):
    started, stop = [], []

    def produce(run: Run) -> Outcome:
        started.append(run.id)
        wait_until(lambda: run.abandoned, 30, "the run given back")
        stop.append(run.id)
        return Outcome("abandoned")

    run = runs.start(owner, METHOD, produce)
    wait_until(lambda: started, 30, "the run under way")
    waiting = runs.submit(owner, METHOD)
    claimed = _claimed(runs, engine, waiting)
    runs.revive = lambda payload: lambda run: Outcome("completed")
    runs.hand_over()
    wait_until(lambda: stop, 30, "the run stopped")
    assert _row(engine, run.id).status == "queued"  # given back: due at once for another process
    assert runs.adopt(claimed) is None  # a run claimed while it drains is given back too
    assert _row(engine, waiting.id).status == "queued"
    frames, outcome = runs.follow(run, 0, lambda: True)
    assert _read(frames) == [] and outcome() == Outcome("handed_over")


def test_a_run_that_cannot_be_revived_fails(runs, engine, owner):
    """A method this release no longer has: the run fails rather than waiting for ever."""
    def unknown(payload: dict):
        raise KeyError(payload["method"])

    runs.revive = unknown
    run = runs.submit(owner, METHOD)
    revived, produce = runs.adopt(_claimed(runs, engine, run))
    runs.execute(revived, produce)
    assert revived.outcome == Outcome("failed") and _row(engine, run.id).status == "failed"


def test_a_resume_of_an_accepted_run_no_process_runs_yet_follows_its_row(runs, owner):
    run = runs.submit(owner, METHOD)  # Redis knows nothing of it until a runner takes it
    frames, outcome = runs.resume(ResumePoint(run.id, 0), owner, METHOD, lambda: False)  # the client then leaves
    assert _read(frames) == [] and outcome() is None


def _held_run(runs: Runs, engine, owner: RunOwner) -> Run:
    """A run this process holds (claimed, registered), whose operation has not run."""
    runs.revive = lambda payload: lambda run: Outcome("completed")
    submitted = runs.submit(owner, METHOD)
    run, _produce = runs.adopt(_claimed(runs, engine, submitted))
    return run


def test_a_run_whose_connection_dropped_is_given_back_once_the_database_answers(runs, engine, owner):
    run = _held_run(runs, engine, owner)
    assert runs.after_outage(run) == Outcome("abandoned")
    assert run.abandoned and _row(engine, run.id).status == "queued"  # another attempt goes on from its state


def test_a_run_whose_connection_dropped_after_its_commit_is_completed(runs, engine, owner):
    run = _held_run(runs, engine, owner)
    with engine.begin() as conn:  # its changes and its row committed; then the connection dropped
        assert TaskRepository(conn).finish(run.id, run.attempt, "done")
    assert runs.after_outage(run) == Outcome("completed")
    assert not run.abandoned


def test_a_run_fails_when_the_database_does_not_come_back_within_the_outage(runs, owner):
    from persona_service.kernel.data.engine import make_engine

    away = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", pool_size=1)
    runs.engine, runs.outage_seconds = away, 0.5
    assert runs.after_outage(Run("run_" + uuid.uuid4().hex, owner, METHOD)) is None


def _queued(runs: Runs, engine) -> list[str]:
    """The ids of the runs of this pool a runner would claim now, claiming them."""
    claimed = []
    while True:
        with engine.begin() as conn:
            task = TaskRepository(conn).claim({runs.kind: runs.lease_seconds})
        if task is None:
            return claimed
        claimed.append(task.id)


def test_a_run_whose_accepting_commit_went_through_unanswered_is_accepted_once(runs, engine, owner):
    """A 503 here had its client ask again, and a runner ran both runs: two personas for one streamed create."""
    with commit_unanswered(engine, went_through=True):
        run = runs.submit(owner, METHOD)
    assert _queued(runs, engine) == [run.id]


def test_a_run_whose_accepting_commit_was_rolled_back_unanswered_is_refused(runs, engine, owner):
    with commit_unanswered(engine, went_through=False), pytest.raises(OperationalError):
        runs.submit(owner, METHOD)
    assert _queued(runs, engine) == []


def test_a_run_this_process_runs_is_accepted_when_its_commit_went_through_unanswered(runs, engine, owner):
    with commit_unanswered(engine, went_through=True):
        run = runs.start(owner, METHOD, lambda run: Outcome("completed"))
    wait_until(lambda: run.outcome is not None, 30, "the run ended")
    assert run.outcome == Outcome("completed") and _row(engine, run.id).attempts == 1
