"""Durable runs: what a streaming RPC streams is a run, not its connection.

A streaming call starts its operation on the run pool (threads of their own,
neither the unary nor the stream server's) and follows the run's frames. The
client going away stops the following, never the run: a generation nobody
listens to any more still finishes, commits and emits its events.

Frames (the serialized response messages, in order; seq 1, 2, …) are also
kept in Redis, short-lived shared state (`FINISHED_TTL` after the run ends),
so a client can resume from any server process with `Last-Event-ID:
<run id>.<seq>`. In the process that runs it, followers wake on a condition
rather than polling. A run lives in the process that started it: if that
process dies the run is lost (nothing of it was committed), and resuming it
ends with the status `lost` once its heartbeat expires (`LIVE_TTL`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis
from google.protobuf.message import Message

from persona_service.kernel import fair
from persona_service.kernel.errors import ApiError, BadRequest, NotFound, ServiceUnavailable
from persona_service.kernel.fair import FairPool
from persona_service.kernel.logs import Throttled

log = logging.getLogger("persona_service.runs")
_warn = Throttled(log)  # at most one line per 10 s while Redis is down

LIVE_TTL = 15  # seconds a running run's frames outlive its last heartbeat
HEARTBEAT = 5
FINISHED_TTL = 600  # seconds a finished run can still be resumed
POLL = 0.05  # seconds between reads when following a run of another process
# Frames reach Redis in batches, at most this late: one round trip per batch of every run's frames,
# not one per frame (per-frame round trips were a third of a process's time under generating streams).
FLUSH_SECONDS = 0.02
_EVENT_ID = re.compile(r"^(run_[0-9a-f]{32})\.([0-9]{1,9})$")


@dataclass(frozen=True)
class Outcome:
    status: str  # completed | failed | lost
    error: ApiError | None = None  # the failure, in the process that ran it


@dataclass(frozen=True)
class RunOwner:
    """Where a run belongs: who may resume it. Its frames are the resource it
    writes (a persona, a chat reply), so the rule is the resource's: the same
    organization and the same workspace (the RPC's scope is checked before)."""

    org_id: str
    workspace_id: str

    def as_meta(self) -> dict[str, str]:
        return {"org": self.org_id, "ws": self.workspace_id}

    def owns(self, meta: dict[str, str]) -> bool:
        return meta.get("org") == self.org_id and meta.get("ws") == self.workspace_id


@dataclass(frozen=True)
class ResumePoint:
    run_id: str
    seq: int  # the last frame the client saw


def resume_point(last_event_id: str | None) -> ResumePoint | None:
    """The `Last-Event-ID` a client resumes from; None when it sent none."""
    if last_event_id is None or not last_event_id.strip():
        return None
    match = _EVENT_ID.match(last_event_id.strip())
    if match is None:
        raise BadRequest(
            "`Last-Event-ID` is not an event id this service sent (`<run id>.<seq>`).",
            {"parameter": "Last-Event-ID"},
        )
    return ResumePoint(match.group(1), int(match.group(2)))


class Run:
    """A run's frames and outcome as the process running it sees them."""

    def __init__(self, run_id: str, owner: RunOwner, method: str):
        self.id = run_id
        self.owner = owner
        self.method = method
        self.frames: list[bytes] = []
        self.outcome: Outcome | None = None
        self._changed = threading.Condition()

    def current_outcome(self) -> Outcome | None:
        return self.outcome

    def emit(self, frame: bytes) -> int:
        with self._changed:
            self.frames.append(frame)
            self._changed.notify_all()
            return len(self.frames)

    def finish(self, outcome: Outcome) -> None:
        with self._changed:
            self.outcome = outcome
            self._changed.notify_all()

    def wait(self, seq: int, timeout: float) -> tuple[list[bytes], Outcome | None]:
        """Frames after `seq` (waiting up to `timeout` for one), and the outcome once every frame is out."""
        with self._changed:
            if len(self.frames) <= seq and self.outcome is None:
                self._changed.wait(timeout)
            frames = self.frames[seq:]
            return frames, self.outcome


class RunStore:
    """Frames and status of runs in Redis (best effort while running: a
    Redis outage loses only the ability to resume)."""

    def __init__(self, client: redis.Redis):
        self.redis = client
        self._pending: list[tuple[str, int, bytes]] = []  # (run id, seq, frame) not in Redis yet
        self._pending_lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush at a time: frames land in order
        self._flusher: threading.Thread | None = None
        self._kept = threading.Event()  # frames are waiting (the flusher sleeps while none are)

    @staticmethod
    def _keys(run_id: str) -> tuple[str, str]:
        return f"run:{run_id}:frames", f"run:{run_id}:meta"

    def start(self, run: Run) -> None:
        frames, meta = self._keys(run.id)
        self._quietly(lambda p: p.hset(meta, mapping={**run.owner.as_meta(), "method": run.method, "status": "running"})
                      .expire(meta, LIVE_TTL))

    def append(self, run_id: str, seq: int, frame: bytes) -> None:
        """Keep a frame (written with the next batch, within FLUSH_SECONDS)."""
        with self._pending_lock:
            self._pending.append((run_id, seq, frame))
            self._kept.set()
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_every, name="run-frames", daemon=True)
                self._flusher.start()

    def finish(self, run_id: str, status: str) -> None:
        """The run's status, after every frame it emitted (in the same round trip)."""
        frames, meta = self._keys(run_id)
        self.flush(lambda p: p.hset(meta, "status", status).expire(meta, FINISHED_TTL).expire(frames, FINISHED_TTL))

    def flush(self, then: Callable | None = None) -> None:
        """Write the frames kept so far (then `then`'s commands) in one pipeline."""
        with self._flush_lock:
            with self._pending_lock:
                pending, self._pending = self._pending, []
            if not pending and then is None:
                return

            def commands(p):
                for run_id, seq, frame in pending:
                    frames = self._keys(run_id)[0]
                    p.rpush(frames, frame)
                    if seq == 1:  # the first frame creates the list; the heartbeat keeps it alive after that
                        p.expire(frames, LIVE_TTL)
                return then(p) if then is not None else p

            self._quietly(commands)

    def _flush_every(self) -> None:
        while True:
            self._kept.wait()
            time.sleep(FLUSH_SECONDS)  # gather a batch
            self._kept.clear()
            self.flush()

    def heartbeat(self, run_ids: list[str]) -> None:
        def beat(p):
            for run_id in run_ids:
                for key in self._keys(run_id):
                    p.expire(key, LIVE_TTL)
            return p

        if run_ids:
            self._quietly(beat)

    def meta(self, run_id: str) -> dict[str, str] | None:
        try:
            raw = self.redis.hgetall(self._keys(run_id)[1])
        except redis.RedisError as exc:
            raise _unavailable() from exc
        return {_text(k): _text(v) for k, v in raw.items()} if raw else None

    def frames(self, run_id: str, after: int) -> list[bytes]:
        try:
            return [_bytes(f) for f in self.redis.lrange(self._keys(run_id)[0], after, -1)]
        except redis.RedisError as exc:
            raise _unavailable() from exc

    def _quietly(self, commands: Callable) -> None:
        try:
            commands(self.redis.pipeline(transaction=False)).execute()
        except redis.RedisError as exc:
            _warn.warning("frames", "run frames not kept in Redis (streams cannot be resumed meanwhile): %s", exc)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _unavailable() -> ServiceUnavailable:
    err = ServiceUnavailable("Streams cannot be resumed right now; retry shortly.", {"retryAfter": 1})
    err.headers = {"retry-after": "1"}
    return err


class Runs:
    """The process's run pool and its live runs."""

    def __init__(self, client: redis.Redis, workers: int):
        self.store = RunStore(client)
        # Runs wait for a worker in one queue per organization, served in turns weighted by plan (kernel.fair).
        self._pool = FairPool(workers, "run")
        self._live: dict[str, Run] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._beating: threading.Thread | None = None

    def start(self, owner: RunOwner, method: str, produce: Callable[[Run], Outcome], weight: int = 1) -> Run:
        """Start `produce(run)` on the run pool (its organization's share of it: `weight`);
        it emits the frames and returns the outcome."""
        run = Run("run_" + uuid.uuid4().hex, owner, method)
        with self._lock:
            self._live[run.id] = run
            if self._beating is None:
                self._beating = threading.Thread(target=self._heartbeat, name="run-heartbeat", daemon=True)
                self._beating.start()
        self.store.start(run)

        def body() -> None:
            outcome = Outcome("failed")
            try:
                outcome = produce(run)
            except Exception:  # noqa: BLE001 - produce settles its own errors; this is a last resort
                log.exception("run %s failed unexpectedly", run.id)
            finally:
                self.store.finish(run.id, outcome.status)
                run.finish(outcome)
                with self._lock:
                    self._live.pop(run.id, None)

        self._pool.submit(owner.org_id, weight, body)
        return run

    def emit(self, run: Run, message: Message) -> None:
        """A frame of the run. Serializing and keeping it take a turn of the process's gate (kernel.fair), as
        the model's steps do; the operation's own steps between frames do not: they wait on SQL, and a turn
        held across a lock wait deadlocks with the lock's holder waiting for a turn."""
        with fair.cpu_turn():
            frame = message.SerializeToString()
            seq = run.emit(frame)
            self.store.append(run.id, seq, frame)

    def follow(self, run: Run, after: int, active: Callable[[], bool]) -> Iterator[tuple[int, bytes]]:
        """The frames of a run of this process after `after`, as they come."""
        seq = after
        while True:
            frames, outcome = run.wait(seq, 1.0)
            for frame in frames:
                seq += 1
                yield seq, frame
            if outcome is not None and not frames:
                return
            if not frames and not active():
                return  # the client went away; the run goes on

    def resume(self, point: ResumePoint, caller: RunOwner, method: str, active: Callable[[], bool]
               ) -> tuple[Iterator[tuple[int, bytes]], Callable[[], Outcome | None]]:
        """Frames after the resume point, from this process's live run or Redis.
        Returns them and a function giving the outcome once they are out. A
        run the caller may not read answers exactly as one that does not exist."""
        with self._lock:
            live = self._live.get(point.run_id)
        if live is not None and live.owner == caller and live.method == method:
            return self.follow(live, point.seq, active), live.current_outcome
        meta = self.store.meta(point.run_id)
        if meta is None or not caller.owns(meta) or meta.get("method") != method:
            raise NotFound("stream run", {"runId": point.run_id})
        state: dict[str, Outcome] = {}
        return self._poll(point, active, state), lambda: state.get("outcome")

    def _poll(self, point: ResumePoint, active: Callable[[], bool], state: dict[str, Outcome]
              ) -> Iterator[tuple[int, bytes]]:
        seq = point.seq
        while True:
            meta = self.store.meta(point.run_id)
            status = "lost" if meta is None else meta.get("status", "running")
            frames = self.store.frames(point.run_id, seq)
            for frame in frames:
                seq += 1
                yield seq, frame
            if status != "running" and not frames:
                state["outcome"] = Outcome(status)
                return
            if not frames:
                if not active():
                    return
                time.sleep(POLL)

    def _heartbeat(self) -> None:
        while not self._stopping.wait(HEARTBEAT):
            with self._lock:
                ids = list(self._live)
            self.store.heartbeat(ids)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking runs; give running ones `timeout` seconds to finish."""
        self._stopping.set()
        self._pool.shutdown()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._live:
                    return
            time.sleep(0.05)
