"""Run frames in Redis (kernel.runs.RunStore): kept in order and in batches,
one round trip for many frames, the status only after every frame."""

from __future__ import annotations

import uuid

import redis
from persona_service.kernel.runs import Run, RunOwner, Runs, RunStore


def test_frames_reach_redis_in_order_in_few_round_trips_and_before_the_status(stack):
    client = redis.Redis.from_url(stack.redis_url)
    store, round_trips = RunStore(client), []
    pipeline = client.pipeline
    client.pipeline = lambda *a, **kw: round_trips.append(1) or pipeline(*a, **kw)  # type: ignore[method-assign]
    run = Run("run_" + uuid.uuid4().hex, RunOwner("org_x", "ws_x"), "/persona.v1.Test/Stream")
    try:
        store.start(run)
        for seq in range(1, 201):
            store.append(run.id, seq, f"frame {seq}".encode())
        store.finish(run, "completed")
        assert len(round_trips) <= 5  # was one per frame
        assert store.frames(run.id, 0) == [f"frame {seq}".encode() for seq in range(1, 201)]
        assert store.meta(run.id)["status"] == "completed"
    finally:
        client.close()


def test_a_process_handing_its_runs_over_takes_none_over():
    runs = Runs(redis.Redis(unix_socket_path="/nonexistent/redis.sock"), 1, None, 10)  # type: ignore[arg-type]
    kind = runs.task_kind()
    assert not kind.paused()
    runs.hand_over()
    assert kind.paused()
