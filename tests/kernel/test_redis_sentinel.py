"""Redis that fails over through Redis Sentinel (issue 49), on real engines: a master, its replica
(`--replicaof`) and one Sentinel (quorum 1) from Debian's redis-server on free ports, and a stack whose
REDIS_URL is `redis+sentinel://…` (process.redis_pool). The master is killed (`kill -9`) with a
stream open; the Sentinel promotes the replica and every Redis user of the service (limiter, stream
followers, pub/sub wake-ups, the invalidation bus, the runner's frames) goes on with the new master.

What a client sees while there is no master (docs/scaling-out.md, with the measured switch time): unary
calls are served (200) without rate-limit headers (the limiter fails open); resuming a stream is 503
`service_unavailable` with `Retry-After: 1`; an open stream pauses and goes on on its connection, and a
new stream asked for meanwhile waits and then streams (kernel.transport.runs: frames Redis refused are
written once it answers, views wait for it): every frame once, in order, one persona each. Afterwards
the rate-limit windows (replicated) and the monthly quota (rebuilt from PostgreSQL) still hold."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis
from persona_service.kernel.transport.runs import RunStore
from persona_service.process import redis_pool
from persona_service.process.stack import free_port
from sqlalchemy import text
from support import (
    TenantFactory,
    assert_envelope,
    client_for,
    engine_for,
    make_stack,
    personas_locked,
    running,
    sse_stream,
    wait_until,
)

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SERVICE = "mymaster"
DOWN_AFTER_MS = 1000
STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
PROGRESS = ["run.started"] + [kind for _ in STEPS for kind in ("step.started", "step.completed")]
TIMEOUT = httpx.Timeout(30.0)
# A bound, not a speed: the switch takes DOWN_AFTER_MS plus the Sentinel's election and promotion (about
# 2-3 s here); the margin is for a loaded 2-core machine.
SWITCH_BOUND_SECONDS = 30


# --- the URL -----------------------------------------------------------------------------------------


def test_the_sentinel_url_names_the_sentinels_the_service_and_the_database():
    url = redis_pool.parse_sentinel("redis+sentinel://:s3cr%40t@10.0.0.1:26379,sentinel-b,[::1]:26380/cache/2"
                                    "?sentinel_password=pw")
    assert url.sentinels == [("10.0.0.1", 26379), ("sentinel-b", 26379), ("::1", 26380)]
    assert (url.service, url.db, url.username, url.password, url.ssl) == ("cache", 2, None, "s3cr@t", False)
    assert url.sentinel_kwargs["password"] == "pw"
    assert redis_pool.parse_sentinel("rediss+sentinel://app:pw@h:1/m").ssl
    assert redis_pool.parse_sentinel("redis+sentinel://h:1/m").db == 0
    assert not redis_pool.is_sentinel("redis://h:6379/0") and not redis_pool.is_sentinel("unix:///tmp/r.sock")
    for bad, says in (("redis+sentinel://h:1", "service"), ("redis+sentinel://h:x/m", "port"),
                      ("redis+sentinel://h:1/m/zero", "database"), ("redis+sentinel://h:1,/m", "empty"),
                      ("redis+sentinel://h:1/m?pool=3", "unknown")):
        with pytest.raises(ValueError, match=says):
            redis_pool.parse_sentinel(bad)


def test_a_plain_url_keeps_its_plain_blocking_pool():
    client = redis_pool.connect("redis://127.0.0.1:6379/3", 4, 0.5)
    assert type(client.connection_pool) is redis.BlockingConnectionPool
    assert client.connection_pool.connection_kwargs["db"] == 3


# --- frames while Redis is away --------------------------------------------------------------------------


def test_frames_redis_refused_are_written_in_order_once_it_answers(tmp_path):
    """A run's frames emitted while Redis is away (restarting here; failing over in the test below) wait in
    their process and are written once it answers, each at its position: views in other processes read a
    run's frames by position, and a batch dropped used to put every later frame at the wrong one."""
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip("needs redis-server")
    port = free_port()

    def start() -> subprocess.Popen:
        server = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
                                   "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        wait_until(lambda: _pings(port), 30, "redis-server answers")
        return server

    server = start()
    try:
        client = redis_pool.connect(f"redis://127.0.0.1:{port}/0", 4, 0.5)
        store, key = RunStore(client), "run:run_frames_test:frames"
        told: list[int] = []
        for seq in (1, 2, 3):
            store.append("run_frames_test", seq, b"frame %d" % seq, told.append)
        wait_until(lambda: client.llen(key) == 3, 30, "the first frames kept")
        client.save()  # what the restart starts from
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        for seq in (4, 5, 6):  # refused: they wait
            store.append("run_frames_test", seq, b"frame %d" % seq, told.append)
        wait_until(lambda: told[-1:] == [6], 30, "the refused frames told (local views do not wait for Redis)")
        server = start()
        store.append("run_frames_test", 7, b"frame 7", told.append)
        wait_until(lambda: client.llen(key) >= 7, 30, "the frames written once Redis answers")
        assert client.lrange(key, 0, -1) == [b"frame %d" % seq for seq in range(1, 8)]
    finally:
        server.kill()
        server.wait(10)


def _pings(port: int) -> bool:
    with contextlib.suppress(redis.RedisError):
        return bool(redis.Redis(port=port, socket_timeout=1).ping())
    return False


# --- the servers ---------------------------------------------------------------------------------------


class Replicated:
    """A master, a replica of it and one Sentinel (quorum 1) on free 127.0.0.1 ports under `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ports = {"a": free_port(), "b": free_port(), "sentinel": free_port()}
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.ports['sentinel']}/{SERVICE}/0"

    def _redis(self, name: str, *extra: str) -> None:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the server's, closed when it exits
        self.processes[name] = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.ports[name]), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--dbfilename", f"{name}.rdb", "--save", "", "--appendonly", "no", *extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        log.close()

    def start(self) -> None:
        self._redis("a")
        wait_until(lambda: self._answers(self.ports["a"]), 30, "the master answers")
        self._redis("b", "--replicaof", "127.0.0.1", str(self.ports["a"]))
        conf = self.folder / "sentinel.conf"  # the Sentinel rewrites it: a file of its own
        conf.write_text(
            f"port {self.ports['sentinel']}\nbind 127.0.0.1\ndir {self.folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['a']} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} 3000\n")
        log = open(self.folder / "sentinel.log", "wb")  # noqa: SIM115
        self.processes["sentinel"] = subprocess.Popen([REDIS_SERVER, str(conf), "--sentinel"], stdout=log,
                                                      stderr=subprocess.STDOUT, cwd=self.folder)
        log.close()
        # The Sentinel can promote the replica only once it found it (through the master's INFO).
        wait_until(lambda: any(r["port"] == self.ports["b"] and not r["is_sdown"] and not r["is_disconnected"]
                               for r in self._sentinel_replicas()), 60, "the Sentinel knows the replica")

    def _answers(self, port: int) -> bool:
        with contextlib.suppress(redis.RedisError):
            return bool(redis.Redis(port=port, socket_timeout=1).ping())
        return False

    def _sentinel_replicas(self) -> list[dict]:
        with contextlib.suppress(redis.RedisError):
            return redis.Redis(port=self.ports["sentinel"], socket_timeout=1).sentinel_slaves(SERVICE)
        return []

    def master_port(self) -> int | None:
        """The master's port as the Sentinel names it now."""
        with contextlib.suppress(redis.RedisError):
            found = redis.Redis(port=self.ports["sentinel"], socket_timeout=1).sentinel_get_master_addr_by_name(SERVICE)
            return int(found[1]) if found else None
        return None

    def client(self, name: str) -> redis.Redis:
        return redis.Redis(port=self.ports[name], socket_timeout=2)

    def replica_caught_up(self) -> bool:
        """The replica has every write the master took (what `kill -9` would otherwise lose)."""
        master = self.client("a").info("replication")
        replicas = [master[k] for k in master if k.startswith("slave") and isinstance(master[k], dict)]
        return bool(replicas) and all(r["offset"] >= master["master_repl_offset"] for r in replicas)

    def kill(self, name: str) -> None:
        process = self.processes[name]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip("needs redis-server (Debian's redis-server package: `make topology-tools`)")
    servers = Replicated(tmp_path_factory.mktemp("sentinel"))
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def own(replicated, tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:  # make_stack takes REDIS_URL from the environment
        env.setenv("REDIS_URL", replicated.url)
        stack = make_stack(tmp_path_factory.mktemp("sentinel-stack"))
    with running(stack):
        yield stack


# --- the failover ----------------------------------------------------------------------------------------


def _limited(response: httpx.Response) -> bool:
    """Answered with the limiter's headers: it reached Redis (failing open, it sends none)."""
    return "x-ratelimit-limit" in response.headers


def _day_used(client: redis.Redis, org_id: str) -> int:
    return sum(int(client.get(key) or 0) for key in client.scan_iter(match=f"rl:{{{org_id}}}:day:*"))


def _resume_now(http: httpx.Client, tenant, event_id: str) -> tuple[str, float]:
    """Resuming the open stream now: `503 <Retry-After>`, or `following` (Redis answered: the view waits for
    the run's next frame, its headers with it); and when (monotonic) it was asked."""
    asked = time.monotonic()
    try:
        with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={},
                         headers={**tenant.auth, "Last-Event-ID": event_id}, timeout=2) as again:
            again.read()
            assert_envelope(again, 503, "service_unavailable")
            assert int(again.headers["retry-after"]) >= 1
            return f"503 {again.headers['retry-after']}", asked
    except httpx.ReadTimeout:
        return "following", asked


def test_the_service_follows_the_master_through_a_failover(own, replicated):
    with engine_for(own) as engine, client_for(own) as http:
        tenants = TenantFactory(engine)
        probe, capped, quota = tenants(plan="pro"), tenants(plan="enterprise"), tenants(plan="enterprise")
        org = f"/v1/orgs/{probe.org_id}"  # pro: 600 a minute, never leased (every call asks Redis)
        first = http.get(org, headers=probe.auth)
        assert first.status_code == 200 and _limited(first), first.text
        assert replicated.master_port() == replicated.ports["a"]
        assert replicated.client("a").dbsize() > 0  # the service writes to the master

        # Limits to find again after the switch: one organization's day used up, another's monthly quota.
        assert http.put("/v1/config/api.rate_limit.requests_per_day", headers=capped.auth,
                        json={"value": 3, "level": "org"}).status_code == 200
        # (The PUT itself was admitted from a lease, whose unused units go back within a second.)
        wait_until(lambda: http.get(f"/v1/orgs/{capped.org_id}", headers=capped.auth).status_code == 429
                   and _day_used(replicated.client("a"), capped.org_id) == 3, 30, "the day's limit used up")
        assert http.put("/v1/config/api.rate_limit.generations_per_month", headers=quota.auth,
                        json={"value": 1, "level": "org"}).status_code == 200
        assert http.post("/v1/personas", headers=quota.auth, json={"intent": "A patient bell ringer"}).status_code == 200
        assert_envelope(http.post("/v1/personas", headers=quota.auth, json={"intent": "A second one"}), 429,
                        "quota_exceeded")

        intent = "A lamplighter who collects echoes"
        with personas_locked(engine) as lock:
            # A stream whose run streamed its steps and waits to write the persona while the master dies.
            stream = httpx.Client(base_url=own.http_url, timeout=TIMEOUT)
            response = stream.send(stream.build_request("POST", "/v1/personas", params={"stream": "true"},
                                                        json={"intent": intent}, headers=probe.auth), stream=True)
            assert response.status_code == 200, response.read()
            run_id = response.headers["x-run-id"]
            events = sse_stream(response.iter_lines())
            seen = [next(events) for _ in PROGRESS]
            # What `kill -9` would lose otherwise (replication is asynchronous): the replica has every write.
            wait_until(replicated.replica_caught_up, 30, "the replica has the master's writes")

            killed = time.monotonic()
            replicated.kill("a")
            answers: list[tuple[float, int, bool]] = []  # (seconds after the kill, status, limited)
            resumes: list[tuple[str, float]] = []
            during = "A tinker who mends kites"
            asked: dict = {}  # a stream asked for while there is no master (its own thread: it waits)

            def ask_during() -> None:
                with httpx.Client(base_url=own.http_url, timeout=TIMEOUT) as other, \
                        other.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": during},
                                     headers=probe.auth) as new:
                    asked["status"] = new.status_code
                    asked["run"] = new.headers.get("x-run-id")
                    asked["events"] = list(sse_stream(new.iter_lines())) if new.status_code == 200 else new.read()

            asking = threading.Thread(target=ask_during)

            def switched() -> bool:
                r = http.get(org, headers=probe.auth)
                answers.append((round(time.monotonic() - killed, 2), r.status_code, _limited(r)))
                if not _limited(r):  # calls that need Redis meanwhile: a new stream, resuming the open one
                    if not asking.is_alive() and not asked:
                        asking.start()
                    resumes.append(_resume_now(http, probe, seen[-1].id))
                return r.status_code == 200 and _limited(r)

            wait_until(switched, SWITCH_BOUND_SECONDS, "calls reach Redis again", every=0.1)
            # Redis reached again: the first limited call, or the first resume that found the run in Redis.
            switch = min([answers[-1][0]] + [at - killed for what, at in resumes if what == "following"])
            assert replicated.master_port() == replicated.ports["b"]  # the Sentinel promoted the replica
            # Meanwhile every call was served (the limiter failing open), never an error; resuming a stream was
            # 503 with Retry-After until Redis answered (then it follows the run: headers with its next frame).
            assert {status for _, status, _ in answers} == {200}, answers
            assert resumes and {what for what, _ in resumes} <= {"503 1", "following"}, resumes
            # From then on every call reaches the new master (no connection left to the old one).
            for _ in range(20):
                r = http.get(org, headers=probe.auth)
                assert r.status_code == 200 and _limited(r), r.headers
            lock.rollback()  # the runs write their personas, their last frames go to the new master
            rest = list(events)  # the open stream paused through the switch and goes on on its connection
            stream.close()
            asking.join(60)
            print(f"\nfailover: calls reached Redis again {switch:.2f} s after the kill ({len(answers)} calls "
                  f"meanwhile, {sum(1 for a in answers if not a[2])} served unlimited); resumes meanwhile: "
                  f"{[what for what, _ in resumes]}; the open stream then got {[e.event for e in rest]}")

        def one_run(events: list, run: str, intent: str) -> None:
            """Every frame once, in order, then `end` `completed`; one persona."""
            frames = [e for e in events if e.event != "end"]
            assert [e.id for e in frames] == [f"{run}.{n}" for n in range(1, len(PROGRESS) + 2)], \
                [(e.id, e.event) for e in events]
            assert [e.event for e in frames] == [*PROGRESS, "persona"]
            assert events[-1].event == "end" and events[-1].json() == {"runId": run, "status": "completed"}
            with engine.connect() as conn:
                assert conn.execute(text("SELECT count(*) FROM personas WHERE intent = :i"), {"i": intent}).scalar() == 1

        one_run(seen + rest, run_id, intent)
        # The stream asked for while there was no master waited for Redis (no 503 for a run it had accepted: a
        # retry would have made a second persona), then streamed every frame its run emitted meanwhile.
        assert asked.get("status") == 200, asked
        one_run(asked["events"], asked["run"], during)

        new_master = replicated.client("b")
        assert new_master.info("replication")["role"] == "master"
        # Limits hold on the new master: the replicated day window is still used up.
        assert _day_used(new_master, capped.org_id) == 3
        assert_envelope(http.get(f"/v1/orgs/{capped.org_id}", headers=capped.auth), 429, "rate_limited")
        # A quota counter the new master lacks (a replica that lagged: its keys dropped here) is rebuilt from
        # PostgreSQL's record of the draws: the quota is still used up.
        lost = list(new_master.scan_iter(match=f"rl:{{{quota.org_id}}}:generations:*"))
        assert lost and new_master.delete(*lost)
        assert_envelope(http.post("/v1/personas", headers=quota.auth, json={"intent": "A third one"}), 429,
                        "quota_exceeded")
        # A new stream runs end to end on the new master (the runner's frames, the server's wake-ups).
        with http.stream("POST", "/v1/personas", params={"stream": "true"}, json={"intent": "A quiet ferryman"},
                         headers=probe.auth, timeout=TIMEOUT) as fresh:
            assert fresh.status_code == 200, fresh.read()
            kinds = [e.event for e in sse_stream(fresh.iter_lines())]
            assert kinds[-2:] == ["persona", "end"], kinds
            assert new_master.exists(f"run:{fresh.headers['x-run-id']}:frames")
