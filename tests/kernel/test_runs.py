"""Run frames in Redis (kernel.transport.runs.RunStore): kept in order and in batches,
one round trip for many frames, the status only after every frame."""

from __future__ import annotations

import uuid

import redis
from persona_service.kernel.transport.runs import Run, RunOwner, Runs, RunStore


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


def test_a_view_relays_every_frame_it_finds_in_one_message():
    from google.api import httpbody_pb2
    from persona.v1 import chat_pb2
    from persona_service.kernel.transport import sse
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.runs import Outcome

    runs = Runs(redis.Redis(unix_socket_path="/nonexistent/redis.sock"), 1, None, 10)  # type: ignore[arg-type]
    run = Run("run_" + uuid.uuid4().hex, RunOwner("org_x", "ws_x"), "/persona.v1.ChatService/StreamChatMessage")
    deltas = [chat_pb2.ChatMessageEvent(event="message.delta", delta=f"part {i}. ") for i in range(3)]
    for delta in deltas:  # the view's thread was busy while three frames came
        run.emit(delta.SerializeToString())
    run.finish(Outcome("completed"))
    frames, outcome = runs.follow(run, 0, lambda: True)
    batches = list(frames)
    assert batches == [[(seq, d.SerializeToString()) for seq, d in enumerate(deltas, 1)]]  # was three, one per frame
    assert outcome() == Outcome("completed")
    meta = MethodMeta(run.method, None, "", "", chat_pb2.ChatMessageEvent)  # type: ignore[arg-type]
    text = httpbody_pb2.HttpBody.FromString(sse.frames(meta, run.id, batches[0])).data.decode()
    assert text == "".join(f'id: {run.id}.{i + 1}\nevent: message.delta\ndata: {{"event":"message.delta","delta":'
                           f'"part {i}. "}}\n\n' for i in range(3))


def test_a_draining_view_ends_once_its_client_has_a_frame_to_resume_from(stack):
    """A stream server's view of a run a runner runs, handed over (its server drains) before the run's
    first frame: it waits for that frame, relays it, then ends (its client resumes elsewhere from the
    frame's id). It used to end at once with nothing relayed: the client had no `Last-Event-ID`, and a
    stream still being accepted when the drain's fixed second ran out was cut off with a 503."""
    import threading

    from persona_service.kernel.transport.runs import Outcome

    client = redis.Redis.from_url(stack.redis_url)
    runner = RunStore(client)  # the runner's side: it writes the frames
    # The stream server's side (no database: its views read Redis only); its client stays open for the
    # wake-up listener's thread.
    runs = Runs(redis.Redis.from_url(stack.redis_url), 1, None, 10)  # type: ignore[arg-type]
    run = Run("run_" + uuid.uuid4().hex, RunOwner("org_x", "ws_x"), "/persona.v1.Test/Stream")
    try:
        runner.start(run)
        frames, outcome = runs.follow(run, 0, lambda: True)
        runs.hand_over()
        first = threading.Timer(0.3, lambda: (runner.append(run.id, 1, b"first"), runner.flush()))
        first.start()
        assert [batch for batch in frames if batch] == [[(1, b"first")]]
        assert outcome() == Outcome("handed_over")
        # A client that has an id (a resume) is let go at once.
        frames, outcome = runs.follow(run, 1, lambda: True)
        assert [batch for batch in frames if batch] == [] and outcome() == Outcome("handed_over")
    finally:
        first.join()
        runner.finish(run, "completed")
        client.close()
