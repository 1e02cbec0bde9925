"""Quiet tenants first (issue 50): a unary server is not woken by the frames of runs it does not serve (each
run's wake-ups go on the run's own channel, kernel.wakeups), and `up` pins runners and stream servers to a
share of the cores, unary servers keeping every core (process.placement)."""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
import redis
from persona_service.kernel import wakeups
from persona_service.process.placement import background_cpus
from persona_service.providers.remote import QUEUE
from support import metric_value, wait_until

TIMEOUT = httpx.Timeout(60.0)
FRAMES = 50  # batches of frames kept for another run while the server's call waits


def _queued_call(client: redis.Redis) -> dict | None:
    """A model call waiting in a queue for a runner, if one does."""
    for queue in client.scan_iter(f"{QUEUE}*"):
        payloads = client.lrange(queue, 0, 0)
        if payloads:
            return json.loads(payloads[0])
    return None


def test_a_unary_server_waiting_on_the_model_is_not_woken_by_frames_of_runs_it_does_not_serve(stack, http, tenants):
    """The runner is paused (SIGSTOP), so a chat message's first model call waits on its unary server (a message
    of 9,000 characters: the offline model's shorter calls are answered in the server, providers.remote); the
    test then keeps frames for another run as a runner does (`wakeups.publish`, kernel.transport.runs), and
    last sends a marker to the waiting server's own inbox: once the marker is counted, so is everything the
    server got before it. Only the marker woke it for nothing (before issue 50's fix: every frame too)."""
    tenant = tenants(plan="pro")
    persona = http.post("/v1/personas", json={"intent": "A lighthouse keeper who knits maps"}, headers=tenant.auth)
    assert persona.status_code == 200, persona.text
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=tenant.auth)
    assert session.status_code == 200, session.text
    messages = f"/v1/chat/sessions/{session.json()['sessionId']}/messages"
    client = redis.Redis.from_url(stack.redis_url)
    unwaited = lambda: metric_value(stack, "persona_wakeups_total", waited="no")  # noqa: E731
    before = unwaited()
    runner = stack.process("runner-0")
    os.kill(runner.pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(1) as pool:
            created = pool.submit(http.post, messages, json={"content": "Tell me about the lamp. " * 375},
                                  headers=tenant.auth, timeout=TIMEOUT)
            try:
                call = wait_until(lambda: _queued_call(client), 60, "the message's model call is queued")
                for _ in range(FRAMES):
                    wakeups.publish(client.pipeline(), ["run_another_organizations"]).execute()
                wakeups.deliver(client.pipeline(), call["inbox"], "persona:test:marker", "").execute()
                wait_until(lambda: unwaited() > before, 30, "the waiting server got the marker")
                assert unwaited() - before == 1
            finally:
                os.kill(runner.pid, signal.SIGCONT)
            assert created.result().status_code == 200, created.result().text
    finally:
        os.kill(runner.pid, signal.SIGCONT)


def _cores(pid: int) -> set[frozenset[int]]:
    """The cores each thread of `pid` may run on (its Cpus_allowed_list), as the distinct sets."""
    return {frozenset(os.sched_getaffinity(int(thread))) for thread in os.listdir(f"/proc/{pid}/task")}


def test_up_pins_runners_and_stream_servers_to_a_share_of_the_cores_and_not_unary_servers(stack):
    cores = frozenset(os.sched_getaffinity(0))
    pinned = frozenset(background_cpus(stack.settings.background_cpu_share, set(cores)) or cores)
    assert _cores(stack.process("runner-0").pid) == {pinned}
    assert _cores(stack.process(f"server-{stack.stream_server_ports[0]}").pid) == {pinned}
    assert _cores(stack.process(f"server-{stack.grpc_ports[0]}").pid) == {cores}
    if len(cores) >= 2:
        assert pinned < cores  # the servers have cores of their own


def test_the_background_cores_are_the_last_share_of_them_at_least_one():
    assert background_cpus(0.5, {0, 1}) == {1}
    assert background_cpus(0.5, set(range(8))) == {4, 5, 6, 7}
    assert background_cpus(0.1, {0, 1, 2, 3}) == {3}
    assert background_cpus(1, {0, 1}) is None  # every core: not pinned
    assert background_cpus(0.5, {3}) is None  # one core: nothing to keep apart
