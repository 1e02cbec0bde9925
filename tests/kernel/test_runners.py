"""Servers serve, runners run (process.runner): a streamed run is executed by a runner process, never by the
server that accepted it; a unary operation's model calls are answered by a runner (the offline model's short
ones in the server: providers.factory.in_process_calls); a runner killed mid-run
loses nothing; a runner claims an accepted run on its notification, not at its next poll."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from contextlib import contextmanager

import httpx
import redis
from persona_service.kernel import wakeups
from persona_service.kernel.transport.runs import Outcome, RunOwner, Runs
from persona_service.kernel.transport.tasks import TaskRunner
from persona_service.process.runner import RunClaimer
from sqlalchemy import text
from support import engine_for, personas_locked, sse_stream, wait_until

TIMEOUT = httpx.Timeout(60.0)
STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]


def _redis(stack) -> redis.Redis:
    return redis.Redis.from_url(stack.redis_url)


def _server_pids(stack) -> set[int]:
    return {stack.process(f"server-{port}").pid for port in stack.grpc_ports}


def _open_stream(stack, tenant, intent: str, frames: int):
    client = httpx.Client(base_url=stack.http_url, timeout=TIMEOUT)
    response = client.send(client.build_request("POST", "/v1/personas", params={"stream": "true"},
                                                json={"intent": intent}, headers=tenant.auth), stream=True)
    assert response.status_code == 200, response.read()
    events = sse_stream(response.iter_lines())
    return client, response, [next(events) for _ in range(frames)]


def test_a_streamed_run_is_executed_by_a_runner_not_by_the_server_that_accepted_it(stack, engine, tenants):
    tenant = tenants(plan="pro")
    with personas_locked(engine) as lock:
        client, response, _ = _open_stream(stack, tenant, "A lamplighter who files weather reports", 2)
        run_id = response.headers["x-run-id"]
        pid = int(_redis(stack).hget(f"run:{run_id}:meta", "pid"))
        lock.rollback()
        response.close()
        client.close()
    assert pid == stack.process("runner-0").pid
    assert pid not in _server_pids(stack)


@contextmanager
def _published(stack):
    """The wake-up keys published while the block runs: on the shared channel, and those delivered to a
    process's own inbox (`wakeups.deliver`: a model call's answer, its key on the message's first line)."""
    seen: list[str] = []
    pubsub = _redis(stack).pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(wakeups.CHANNEL)
    pubsub.psubscribe(f"{wakeups.CHANNEL}:*")
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            message = pubsub.get_message(timeout=0.2)
            if message is None:
                continue
            data = message["data"].decode()
            seen.extend([data.partition("\n")[0]] if message["type"] == "pmessage" else data.split())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield seen
    finally:
        # Everything published before this marker has reached the reader once the marker has (one channel: in
        # order), instead of a pause that was probably long enough.
        marker = f"persona:test:published:{os.getpid()}:{time.monotonic_ns()}"
        _redis(stack).publish(wakeups.CHANNEL, marker)
        wait_until(lambda: marker in seen, 30, "the reader got the marker")
        seen.remove(marker)
        stop.set()
        reader.join()
        pubsub.close()


def test_a_unary_operation_gets_its_long_model_calls_answered_by_a_runner(stack, http, tenants):
    """A unary operation's model call goes to a runner unless it is the offline model's and short
    (providers.remote.IN_PROCESS_MAX_CHARS): a chat message of 9,000 characters is moderated and answered by a
    runner (delivered to the waiting server's inbox); a short one is answered in the server, through no runner."""
    tenant = tenants(plan="pro")
    created = http.post("/v1/personas", json={"intent": "A beekeeper who writes sonnets"}, headers=tenant.auth)
    assert created.status_code == 200, created.text
    session = http.post("/v1/chat/sessions", json={"personaId": created.json()["id"]}, headers=tenant.auth)
    assert session.status_code == 200, session.text
    messages = f"/v1/chat/sessions/{session.json()['sessionId']}/messages"
    with _published(stack) as short:
        reply = http.post(messages, json={"content": "How are the bees today?"}, headers=tenant.auth)
    assert reply.status_code == 200, reply.text
    assert not [key for key in short if key.startswith("persona:model:answer:")], short
    with _published(stack) as long:
        reply = http.post(messages, json={"content": "Tell me about the hive. " * 375}, headers=tenant.auth)
    assert reply.status_code == 200, reply.text
    # Its moderation and its completion: each a call a runner answered.
    assert len([key for key in long if key.startswith("persona:model:answer:")]) >= 2, long


def test_a_server_is_subscribed_to_no_run_channel_once_its_calls_are_answered(stack, http, tenants):
    """A unary server whose call waited for the model is not woken by the frames of runs after it (issue 50:
    36-38 ms/s of CPU under three organizations' streams): its answers come to its own inbox, and no run's
    channel (nor the former shared one) has it as a subscriber."""
    client = _redis(stack)
    tenant = tenants(plan="pro")
    for intent in ("A glassblower who hums sea shanties", "A cartographer of imaginary rivers"):
        created = http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
        assert created.status_code == 200, created.text
        # (Only the views of earlier tests' streams, closed by their clients, may still be leaving theirs.)
        wait_until(lambda: all(re.fullmatch(rf"{wakeups.CHANNEL}:[0-9a-f]{{32}}", name.decode())
                               for name in client.pubsub_channels(f"{wakeups.CHANNEL}*")),
                   30, "only processes' inboxes are subscribed to")


def test_a_runner_killed_mid_run_loses_nothing_its_run_is_taken_over(stack, http, engine, tenants):
    tenant = tenants(plan="pro")
    intent = "A tram driver who collects lost umbrellas"
    with personas_locked(engine) as lock:
        client, response, seen = _open_stream(stack, tenant, intent, 3)
        run_id = response.headers["x-run-id"]
        runner = stack.process("runner-0")
        os.kill(runner.pid, signal.SIGKILL)  # mid-run: its persona cannot be written while the lock holds
        runner.wait()
        response.close()
        client.close()
        lock.rollback()
    # The supervisor starts a runner again; it takes the run over once the dead one's lease ran out.
    with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={},
                     headers={**tenant.auth, "Last-Event-ID": seen[-1].id}, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        rest = list(sse_stream(r.iter_lines()))
    events = seen + rest[:-1]
    assert [e.id for e in events] == [f"{run_id}.{n}" for n in range(1, len(events) + 1)]  # no gap, no repeat
    assert rest[-1].event == "end" and rest[-1].json() == {"runId": run_id, "status": "completed"}
    persona = events[-1].json()["persona"]
    items = http.get("/v1/personas", params={"limit": 100}, headers=tenant.auth).json()["items"]
    assert [p["id"] for p in items if p["intent"] == intent] == [persona["id"]]
    with engine.connect() as conn:
        attempts = conn.execute(text("SELECT attempts FROM tasks WHERE id = :r"), {"r": run_id}).scalar()
        steps = conn.execute(text("SELECT step FROM generation_steps WHERE run_id = :r ORDER BY ordinal"),
                             {"r": persona["lastRunId"]}).scalars().all()
    assert attempts == 2
    assert steps == STEPS


def test_a_runner_claims_an_accepted_run_on_its_notification_not_at_its_next_poll(stack, tenants):
    """The stack's runner is paused (SIGSTOP): a claimer of this process, polling only every 60 s, gets the run
    a server-role `Runs` accepts, at once."""
    tenant = tenants(plan="pro")
    client = _redis(stack)
    ran = threading.Event()
    runner = stack.process("runner-0")
    with engine_for(stack, pool_size=4) as engine:
        server = Runs(client, 1, engine, lease_seconds=5, role="server")
        runs = Runs(client, 1, engine, lease_seconds=5, role="runner")
        runs.revive = lambda payload: lambda run: (ran.set(), Outcome("failed"))[1]
        claimer = RunClaimer(runs, engine, TaskRunner(None, engine, {}, 0, 60), 1,  # type: ignore[arg-type]
                             poll_seconds=60)
        looked = threading.Event()  # its first look (at start) is over: only a notification wakes it after
        first_look = claimer._claim_all

        def claim_all() -> bool:
            try:
                return first_look()
            finally:
                looked.set()

        claimer._claim_all = claim_all  # type: ignore[method-assign]
        os.kill(runner.pid, signal.SIGSTOP)
        try:
            claimer.start()
            assert claimer.listening.wait(30) and looked.wait(30)
            server.submit(RunOwner(tenant.org_id, tenant.workspace_id), "/test/Notified")
            assert ran.wait(10), "the run was not claimed before the poll"
        finally:
            os.kill(runner.pid, signal.SIGCONT)
            claimer.close()
            runs.close()


def test_a_runner_runs_under_sched_idle_every_thread_of_it(stack):
    """PERSONA_RUNNER_PRIORITY=idle (the default): the model's work takes only CPU time nothing else wants, so
    on a shared machine it never delays a server's call (scripts/hostile_load.py --only neighbours)."""
    pid = stack.process("runner-0").pid
    threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    assert len(threads) > 1
    assert {os.sched_getscheduler(tid) for tid in threads} == {os.SCHED_IDLE}
    assert os.sched_getscheduler(stack.process(f"server-{stack.grpc_ports[0]}").pid) == os.SCHED_OTHER
