"""Durable runs: what a streaming RPC streams is a run, not its connection.

Process roles (docs/process-model.md): a server accepts a run (`submit`) and
follows its frames from Redis; a runner claims and executes it (process.runner,
`adopt`); a one-process `all` App does both (what follows describes that).

A streaming call is accepted by writing its run to PostgreSQL (a task of
kind `run`, kernel.transport.tasks: the request, who asked, and the state saved so
far), then its operation runs on this process's run pool (threads of their
own, organizations taking turns, kernel.transport.fair) under the task's lease, which
a heartbeat renews. The call itself only follows the run's frames (a view):
the client going away stops the following, never the run.

Frames (the serialized response messages, in order; seq 1, 2, …) are kept
in Redis (`FINISHED_TTL` after the run ends), so a client can resume from
any server process with `Last-Event-ID: <run id>.<seq>`; in the process that
runs it, followers wake on a condition rather than polling. A run started
with an Idempotency-Key is replayed for as long as the key is kept (24 h),
longer than Redis keeps it: when it ends, its frames and outcome are saved
with the key's record before its clients are told it ended (`keep`,
`pack_ended`), and a replay Redis cannot answer reads them (`saved_view`).

If the process dies (or is drained, `hand_over`), the lease runs out (or is
given back) and another process takes the run over: it runs the operation
again from its saved state. The operation's changes commit in one unit of
work, together with the run's completion, only while its attempt holds the
lease, so they happen exactly once; what it does before (provider calls) is
saved step by step (`RunSteps.checkpoint`, the call's `ctx.run`) and not repeated, and the frames it
emits again are the ones already kept, so the stream goes on gaplessly from
the frames Redis has. A view sends a frame only once it is kept, so those are
all a client saw: an operation whose frames are not reproducible (a sampled
reply) reads them (`RunSteps.earlier_frames`) and goes on from them. A run ends `lost`
when nobody could finish it: no attempt did in `RUN_ATTEMPTS`, or it cannot
go on from what its clients saw (`RunLost`: Redis forgot its frames).

While Redis is away (a restart; a Sentinel failover, process.redis_pool)
the run goes on: the batches Redis refuses wait, in order, and are written
once it answers (up to LIVE_TTL), so the frames it keeps stay every frame of
the run at its position; a view reading them from Redis waits for it as a run
waits for the database (`outage_seconds`), its stream open, rather than
ending (a new stream's run was accepted already: a 503 would make its client
ask for a second one).
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

import redis
from google.protobuf.message import Message
from redis.client import Pipeline
from redis.typing import EncodableT
from sqlalchemy import Connection, Engine

from persona_service.kernel import wakeups
from persona_service.kernel.data.outages import connection_lost, read_when_back
from persona_service.kernel.data.tasks_repository import TaskRecord, TaskRepository, notify
from persona_service.kernel.errors import ApiError, BadRequest, NotFound, ServiceUnavailable
from persona_service.kernel.json_values import JSONObject, as_object
from persona_service.kernel.logs import Throttled
from persona_service.kernel.transport.fair import FairPool, Turn
from persona_service.kernel.transport.idempotency import Claim
from persona_service.kernel.transport.tasks import TaskKind

log = logging.getLogger("persona_service.runs")
_warn = Throttled(log)  # at most one line per 10 s while Redis is down

T = TypeVar("T")
# What commits with a run's acceptance, given its connection and the run's id (its Idempotency-Key's claim).
Accepted = Callable[[Connection, str], None]
# Frames of a run as a view reads them: (seq, frame), in order; an empty batch is a keep-alive (KEEP_ALIVE_SECONDS).
Batch = list[tuple[int, bytes]]
RUN_TASK = "run"  # the task kind of a run (its row: the run's lease and saved state)
# Saves an ended keyed run's frames (`pack_ended`) with its Idempotency-Key's record (kernel.transport.idempotency).
Keep = Callable[[Claim, str, bytes], None]


def run_kind(pool: str) -> str:
    """The task kind of the runs accepted by processes configured as `pool` (the provider configuration's
    fingerprint): only runners configured alike claim them, so a run's model is the one its server was set up with
    even where stacks configured otherwise share the PostgreSQL."""
    return f"{RUN_TASK}:{pool}" if pool else RUN_TASK

# Attempts of a run (the first and takeovers after a lost or given-back lease) before it ends `lost`.
RUN_ATTEMPTS = 5
LIVE_TTL = 60  # seconds a running run's frames outlive its last heartbeat (longer than a takeover takes)
FINISHED_TTL = 600  # seconds a finished run can still be resumed
# Runners claim new runs at once when told on this PostgreSQL channel (process.runner), else at their next poll.
RUNS_CHANNEL = "persona_runs"
ROW_POLL = 1.0  # seconds between reads of the run's row while no process runs it (Redis has no status)
# Frames reach Redis in batches, at most this late: one round trip per batch of every run's frames,
# not one per frame (per-frame round trips were a third of a process's time under generating streams).
# A run's first frame goes at once (with whatever is waiting): a stream's first frame is its latency.
FLUSH_SECONDS = 0.02
# A batch Redis refused is tried again this often (frames wait in order meanwhile, up to LIVE_TTL).
REFUSED_RETRY_SECONDS = 0.25
# A view with nothing to send for this long sends a keep-alive (an SSE comment at the edge), so that proxies
# between it and its client do not cut a stream that waits (for the database, for a takeover).
KEEP_ALIVE_SECONDS = 15.0
_EVENT_ID = re.compile(r"^(run_[0-9a-f]{32})\.([0-9]{1,9})$")


@dataclass(frozen=True)
class Outcome:
    # completed | failed | lost; abandoned: this attempt lost its lease (another
    # process goes on with the run); handed_over: this process is draining and
    # ends its streams so their clients resume on another (no `end` event).
    status: str
    error: ApiError | None = None  # the failure, in the process that ran it


class RunAbandoned(Exception):
    """This attempt no longer holds the run's lease: it stops and rolls back."""


class RunLost(Exception):
    """The run cannot go on consistently with what its clients may have seen (the frames an earlier
    attempt emitted are no longer kept): it ends `lost` and rolls back, rather than streaming a second,
    different version after the first."""


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

    def __init__(self, run_id: str, owner: RunOwner, method: str, attempt: int = 1,
                 state: JSONObject | None = None, kept: int = 0, key: str | None = None):
        self.id = run_id
        self.owner = owner
        self.method = method
        # The Idempotency-Key whose replays follow the run: its frames are saved with the key once it ends.
        self.claim = None if key is None else Claim(owner.org_id, key)
        self.attempt = attempt  # of the run's task: the lease this process holds
        self.state = dict(state or {})  # what `RunSteps.checkpoint` saved, by key
        self.kept = kept  # frames an earlier attempt kept in Redis: emitted again, they are not kept twice
        self.frames: list[bytes] = []
        self.outcome: Outcome | None = None
        self.abandoned = False
        self._changed = threading.Condition()
        self.save: Callable[[str, object], None] = lambda key, value: None
        # The frames earlier attempts kept, read when asked (`RunSteps.earlier_frames`); None: Redis forgot the run.
        self.earlier: Callable[[], list[bytes] | None] = lambda: []
        # Frames a view may send: kept in Redis (or refused by it), so a takeover goes on from all a client saw.
        self.flushed = 0

    def current_outcome(self) -> Outcome | None:
        return self.outcome

    def emit(self, frame: bytes, keep: Callable[[int], None] | None = None, committed: bool = False) -> int:
        """Add a frame and `keep(seq)` it (views send it once `kept_up_to(seq)`), unless the run was
        abandoned (atomically with `abandon`). A `committed` run's frames go out even then: its changes
        are committed, so no other attempt will run it (a drain or a late lease check abandons it)."""
        with self._changed:
            if self.abandoned and not committed:
                raise RunAbandoned(self.id)
            self.frames.append(frame)
            seq = len(self.frames)
            if seq > self.kept and keep is not None:
                keep(seq)
            else:  # kept by an earlier attempt, or nothing keeps this run's frames
                self.flushed = seq
                self._changed.notify_all()
            return seq

    def kept_up_to(self, seq: int) -> None:
        with self._changed:
            if seq > self.flushed:
                self.flushed = seq
                self._changed.notify_all()

    def abandon(self) -> None:
        with self._changed:
            self.abandoned = True
            self._changed.notify_all()

    def finish(self, outcome: Outcome) -> None:
        with self._changed:
            self.outcome = outcome
            self._changed.notify_all()

    def wait(self, seq: int, timeout: float) -> tuple[list[bytes], Outcome | None]:
        """Frames after `seq` (waiting up to `timeout` for one), and the outcome once every frame is out."""
        with self._changed:
            if self.flushed <= seq and self.outcome is None:
                self._changed.wait(timeout)
            frames = self.frames[seq:self.flushed]
            return frames, self.outcome


class RunStore:
    """Frames and status of runs in Redis. A batch Redis refuses is written again once it answers, before
    anything after it (up to LIVE_TTL; past that it is dropped, and only the ability to resume is lost)."""

    def __init__(self, client: redis.Redis):
        self.redis = client
        # (run id, seq, frame, told once it is written) not in Redis yet
        self._pending: list[tuple[str, int, bytes, Callable[[int], None]]] = []
        self._pending_lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush at a time: frames land in order
        self._flusher: threading.Thread | None = None
        self._kept = threading.Event()  # frames are waiting (the flusher sleeps while none are)
        self._first = threading.Event()  # a run's first frame is waiting: written at once, not with the next batch
        # While Redis refuses the batches (a restart, a failover): what to write after the frames (a run's end,
        # runs to wake) and since when (monotonic) it refuses them (flush).
        self._deferred: list[Callable[[Pipeline], Pipeline]] = []
        self._woken: set[str] = set()
        self._refused_since: float | None = None

    @staticmethod
    def _keys(run_id: str) -> tuple[str, str]:
        return f"run:{run_id}:frames", f"run:{run_id}:meta"

    def start(self, run: Run) -> None:
        frames, meta = self._keys(run.id)
        # `pid`: the process running it (an operator's answer to "where does this run run?").
        fields = _hash({**run.owner.as_meta(), "method": run.method, "status": "running", "pid": os.getpid()})

        def started(p: Pipeline) -> Pipeline:
            p.hset(meta, mapping=fields)
            p.expire(meta, LIVE_TTL)
            return p

        self._quietly(started)

    def kept(self, run_id: str) -> int:
        """How many frames of the run Redis has (0 when it has none or is away)."""
        try:
            return int(self.redis.llen(self._keys(run_id)[0]))
        except redis.RedisError as exc:
            _warn.warning("frames", "run frames not read from Redis: %s", exc)
            return 0

    def known(self, run_id: str) -> bool:
        """Whether Redis still has the run (its meta, written when it starts): then its frames kept are all
        of them a client could see (False when Redis is away)."""
        try:
            return bool(self.redis.exists(self._keys(run_id)[1]))
        except redis.RedisError as exc:
            _warn.warning("frames", "run frames not read from Redis: %s", exc)
            return False

    def ended(self, run_id: str) -> str | None:
        """How the run ended, as its clients were told (None while it runs, or when Redis forgot it or is away)."""
        try:
            status = self.redis.hget(self._keys(run_id)[1], "status")
        except redis.RedisError as exc:
            _warn.warning("frames", "run frames not read from Redis: %s", exc)
            return None
        return None if status is None or _text(status) == "running" else _text(status)

    def append(self, run_id: str, seq: int, frame: bytes, kept: Callable[[int], None] = lambda seq: None) -> None:
        """Keep a frame (written with the next batch, within FLUSH_SECONDS; then `kept(seq)`)."""
        with self._pending_lock:
            self._pending.append((run_id, seq, frame, kept))
            if seq == 1:  # what its client waits for before anything else (a stream's first frame)
                self._first.set()
            self._wake_flusher()

    def _wake_flusher(self) -> None:
        """(Holding `_pending_lock`.) Frames or a refused batch wait: the flusher writes them."""
        self._kept.set()
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_every, name="run-frames", daemon=True)
            self._flusher.start()

    def finish(self, run: Run, status: str, error: ApiError | None = None) -> None:
        """The run's status (and its error, for views in other processes), after every frame it emitted (in
        the same round trip)."""
        frames, meta = self._keys(run.id)
        ended = {**run.owner.as_meta(), "method": run.method, "status": status}
        if error is not None:
            ended["error"] = _error_json(error)
        fields = _hash(ended)

        def finished(p: Pipeline) -> Pipeline:
            p.hset(meta, mapping=fields)
            p.expire(meta, FINISHED_TTL)
            p.expire(frames, FINISHED_TTL)
            return p

        self.flush(finished, also=run.id)

    def flush(self, then: Callable[[Pipeline], Pipeline] | None = None, also: str = "") -> None:
        """Write the frames kept so far (then `then`'s commands) in one pipeline, and wake the views of
        their runs (and of run `also`) in every process."""
        with self._flush_lock:
            with self._pending_lock:
                pending, self._pending = self._pending, []
            if then is not None:
                self._deferred.append(then)
            self._woken.update([*(run_id for run_id, *_ in pending), *([also] if also else [])])
            if not pending and not self._deferred:
                return
            deferred, woken = list(self._deferred), list(self._woken)

            def commands(p: Pipeline) -> Pipeline:
                for run_id, _seq, frame, _kept in pending:
                    frames = self._keys(run_id)[0]
                    p.rpush(frames, frame)
                    p.expire(frames, LIVE_TTL)  # the heartbeat keeps it alive after that
                for after in deferred:
                    p = after(p)
                return wakeups.publish(p, woken)

            written = self._quietly(commands, transaction=True)  # all or none: a batch tried again is never half there
            if written or self._gave_up():
                self._deferred, self._woken, self._refused_since = [], set(), None
            else:
                # Refused (Redis restarts, or fails over to a replica): tried again, in order, before what comes
                # next, so that the frames in Redis stay every frame of the run, each at its seq (views in other
                # processes read them by position). Their `kept` is told now, as before: Redis is not waited for.
                with self._pending_lock:
                    self._pending[:0] = [(run_id, seq, frame, _told) for run_id, seq, frame, _kept in pending]
                    self._wake_flusher()
            last: dict[str, tuple[int, Callable[[int], None]]] = {}
            for run_id, seq, _frame, kept in pending:
                last[run_id] = (seq, kept)
            for seq, kept in last.values():  # written (or refused by Redis: resuming is unavailable meanwhile)
                kept(seq)

    def _gave_up(self) -> bool:
        """Whether Redis has refused the batches for so long (LIVE_TTL: the runs' keys are gone by then) that what
        waits is dropped (the runs' streams can no longer be resumed)."""
        now = time.monotonic()
        if self._refused_since is None:
            self._refused_since = now
        if now - self._refused_since < LIVE_TTL:
            return False
        _warn.warning("frames-dropped", "Redis refused run frames for %d s: dropped", LIVE_TTL)
        with self._pending_lock:
            self._pending = []
        return True

    def _flush_every(self) -> None:
        while True:
            self._kept.wait()
            self._first.wait(FLUSH_SECONDS)  # gather a batch, unless a first frame waits
            self._first.clear()
            self._kept.clear()
            self.flush()
            if self._refused_since is not None:
                time.sleep(REFUSED_RETRY_SECONDS)  # Redis refused the batch: try again, not at once

    def heartbeat(self, run_ids: list[str]) -> None:
        def beat(p: Pipeline) -> Pipeline:
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

    def _quietly(self, commands: Callable[[Pipeline], Pipeline], transaction: bool = False) -> bool:
        try:
            commands(self.redis.pipeline(transaction=transaction)).execute()
        except redis.RedisError as exc:
            _warn.warning("frames", "run frames not kept in Redis (streams cannot be resumed meanwhile): %s", exc)
            return False
        return True


def _hash(fields: Mapping[str, str | int]) -> dict[EncodableT, EncodableT]:
    """A Redis hash's fields as redis-py's HSET is typed to take them (its mapping's key type is invariant)."""
    return dict(fields.items())


def _told(seq: int) -> None:
    """A frame's `kept`, once told (a batch Redis refused is written again later)."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _unavailable() -> ServiceUnavailable:
    err = ServiceUnavailable("Streams cannot be resumed right now; retry shortly.", {"retryAfter": 1})
    err.headers = {"retry-after": "1"}
    return err


def _error_json(error: ApiError) -> str:
    return json.dumps({"code": error.code, "message": error.message, "details": error.details,
                       "headers": error.headers})


def pack_ended(frames: list[bytes], status: str, error: ApiError | None) -> bytes:
    """An ended run as a replay answers it: its outcome (as `RunStore.finish` tells views), then its frames, each
    length-prefixed (`saved_view` reads it)."""
    head = json.dumps({"status": status, "error": None if error is None else _error_json(error)}).encode()
    return b"".join(struct.pack(">I", len(part)) + part for part in (head, *frames))


def saved_view(packed: bytes) -> tuple[Iterator[Batch], Callable[[], Outcome | None]]:
    """An ended run's saved frames (`pack_ended`) as `Runs.resume` hands a view them: every frame from the
    first, in one batch, then its outcome."""
    parts, at = [], 0
    while at < len(packed):
        (size,) = struct.unpack_from(">I", packed, at)
        parts.append(packed[at + 4:at + 4 + size])
        at += 4 + size
    head = as_object(json.loads(parts[0])) or {}
    error = head.get("error")
    outcome = Outcome(_string(head.get("status")), _error_of({"error": error} if isinstance(error, str) else None))
    frames: list[Batch] = [list(enumerate(parts[1:], 1))] if len(parts) > 1 else []
    return iter(frames), lambda: outcome


def _error_of(meta: dict[str, str] | None) -> ApiError | None:
    """The error a run ended with, as the process that ran it kept it (views in other processes answer it)."""
    kept = (meta or {}).get("error")
    if not kept:
        return None
    fields = json.loads(kept)
    err = ApiError(fields["message"], fields.get("details") or {}, code=fields["code"])
    err.headers = dict(fields.get("headers") or {})
    return err


def _task_status(status: str) -> str:
    return {"completed": "done", "lost": "failed"}.get(status, status)


def _settled(run: Run) -> JSONObject:
    """A settled run's row keeps who may read it, not its request nor its saved state (personal data)."""
    return {"method": run.method, "owner": run.owner.as_meta(), "state": {}}


class RunSteps:
    """A durable run as its operation uses it, handed with the call (`RequestContext.run`): its id, what it
    saved step by step, the frames earlier attempts sent."""

    def __init__(self, run: Run) -> None:
        self._run = run

    @property
    def id(self) -> str:
        return self._run.id

    @property
    def attempt(self) -> int:
        """This attempt's number: 1 for the first, the next for each process taking the run over."""
        return self._run.attempt

    def checkpoint(self, key: str, make: Callable[[], T]) -> T:
        """`make()`'s value, saved with the run (JSON): a run taken over after its process died gets the saved
        value instead of making it again (an id it already streamed, a provider call's answer). `make` must
        change nothing the run's unit of work would not roll back: what it returns is all that is kept."""
        state = self._run.state
        if key in state:
            return cast(T, state[key])
        value = make()
        self._run.save(key, value)
        state[key] = value
        return value

    def earlier_frames(self) -> list[bytes]:
        """The frames earlier attempts of the run emitted (clients may have seen them), as kept: an operation
        whose frames are not reproducible (a sampled reply) emits them again, then goes on from them (views
        send a frame only once it is kept, so they are all a client saw). [] on its first attempt. Raises
        `RunLost` when Redis forgot the run (its frames expired, Redis lost them): what clients saw cannot
        be known."""
        frames = self._run.earlier()
        if frames is None:
            raise RunLost(self._run.id)
        return frames


def _keep_alive() -> Callable[[bool], bool]:
    """For a view: whether, having sent frames now or not, it is due a keep-alive (an empty batch: it sent
    nothing for KEEP_ALIVE_SECONDS)."""
    last = time.monotonic()

    def due(sent: bool) -> bool:
        nonlocal last
        now = time.monotonic()
        if not sent and now - last < KEEP_ALIVE_SECONDS:
            return False
        last = now
        return not sent

    return due


# Revives a run another process started from its task's payload: the operation to run.
Reviver = Callable[[JSONObject], Callable[[Run], Outcome]]


@dataclass(frozen=True)
class RunRow:
    """A run's task row as a process taking it reads it: its payload, written when the run was accepted (who
    asked, the method, the state saved so far; the request `revive` reads), checked once here."""

    method: str
    owner: RunOwner
    state: JSONObject
    weight: int
    payload: JSONObject
    key: str | None  # its Idempotency-Key (`Run.claim`)

    @classmethod
    def of(cls, task: TaskRecord) -> RunRow:
        payload = task.payload
        owner = as_object(payload.get("owner")) or {}
        weight = payload.get("weight")
        key = payload.get(_KEY_FIELD)
        return cls(_string(payload.get("method")), RunOwner(_string(owner.get("org")), _string(owner.get("ws"))),
                   as_object(payload.get("state")) or {}, weight if isinstance(weight, int) else 1, payload,
                   key if isinstance(key, str) else None)


def _keyed(key: str | None) -> JSONObject:
    """A keyed run's payload names its key (the process ending it saves its frames with it); an unkeyed one's
    nothing."""
    return {} if key is None else {_KEY_FIELD: key}


_KEY_FIELD = "idempotency_key"


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


class Runs:
    """The process's run pool, its live runs and their leases.

    Where runs execute depends on the process's role: a `server` only accepts
    runs (`submit`: the row, for a runner to claim) and follows them from
    Redis; a `runner` executes them (process.runner claims them, `adopt`); a
    process that is both (`all`: one-process tools and tests) runs what it
    accepts on its own pool (`start`)."""

    def __init__(self, client: redis.Redis, workers: int, engine: Engine, lease_seconds: float,
                 outage_seconds: float = 30.0, role: str = "all", pool: str = ""):
        self.role = role
        self.kind = run_kind(pool)  # the kind of this process's runs' rows (what its runner claims)
        self.store = RunStore(client)
        self.wakeups = wakeups.Wakeups(client)
        self.engine = engine
        self.lease_seconds = lease_seconds
        # How long a run whose database connection dropped waits for the database (`after_outage`).
        self.outage_seconds = outage_seconds
        # Runs wait for a worker in one queue per organization, served in turns weighted by plan (kernel.transport.fair).
        self._pool = FairPool(workers, "run")
        self._live: dict[str, Run] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._handing_over = threading.Event()
        self._beating: threading.Thread | None = None
        self.revive: Reviver | None = None  # set by the stream server (kernel.transport.pipeline)
        self.keep: Keep | None = None  # set by the App (its Idempotency's keep_frames)

    def share_with(self, waiting: Callable[[], dict[str, int]]) -> None:
        """Organizations waiting for the process's unary workers bound the others' share of run workers too."""
        self._pool.share_with(waiting)

    @property
    def runs_here(self) -> bool:
        """Whether a run this process accepts runs on its own pool (else a runner claims it)."""
        return self.role == "all"

    def task_kind(self) -> TaskKind[object]:
        """Runs whose lease ran out are taken over by any process's task threads."""
        return TaskKind(self.kind, run=lambda _runtime, task: self._take_over(task),
                        give_up=lambda _runtime, task, _error: self._lose(task), max_attempts=RUN_ATTEMPTS,
                        backoff_seconds=0, lease_seconds=self.lease_seconds, paused=self._handing_over.is_set)

    def start(self, owner: RunOwner, method: str, produce: Callable[[Run], Outcome], weight: int = 1,
              payload: JSONObject | None = None, also: Accepted | None = None, key: str | None = None) -> Run:
        """Accept a run (its row committed, under this process's lease) and
        start `produce(run)` on the run pool (its organization's share of it:
        `weight`); it emits the frames and returns the outcome. `payload` is
        what `revive` needs to run it in another process; `also`, what commits with its acceptance; `key`, the
        Idempotency-Key whose replays follow it."""
        run = Run("run_" + uuid.uuid4().hex, owner, method, key=key)
        self._accept(run.id, lambda conn: TaskRepository(conn).add_held(
            self.lease_seconds, id=run.id, kind=self.kind, org_id=owner.org_id, subject_id=owner.workspace_id,
            payload={**(payload or {}), **_keyed(key), "method": method, "owner": owner.as_meta(), "state": {}}),
            also)
        self._register(run)
        self._pool.submit(owner.org_id, weight, lambda: self._execute(run, produce))
        return run

    def submit(self, owner: RunOwner, method: str, weight: int = 1, payload: JSONObject | None = None,
               also: Accepted | None = None, key: str | None = None) -> Run:
        """Accept a run for a runner (a server process): its row is committed, queued, with a notification
        that wakes an idle runner at once. Returns the run to follow (`follow` reads its frames from Redis)."""
        run = Run("run_" + uuid.uuid4().hex, owner, method, key=key)

        def add(conn: Connection) -> None:
            TaskRepository(conn).add(
                id=run.id, kind=self.kind, org_id=owner.org_id, subject_id=owner.workspace_id,
                payload={**(payload or {}), **_keyed(key), "method": method, "owner": owner.as_meta(), "state": {},
                         "weight": weight})
            notify(conn, RUNS_CHANNEL)

        self._accept(run.id, add, also)
        return run

    def _accept(self, run_id: str, add: Callable[[Connection], None], also: Accepted | None) -> None:
        """Commit a new run's row (`add`, and `also`: its Idempotency-Key's claim). A COMMIT whose connection dropped (a PgBouncer or PostgreSQL restart)
        may have gone through unanswered: a 503 then would have the client ask again, and a process would run
        both runs (two personas for one create). So the doubt is settled from the row itself, read back once the
        database answers: there, the run was accepted and the call goes on; not there, nothing was, and the
        error stands. Still away after `outage_seconds`: the error stands too (the run's fate unknown)."""
        committing = False  # a failure before the COMMIT (to connect, to insert) leaves no doubt
        try:
            with self.engine.begin() as conn:
                add(conn)
                if also is not None:
                    also(conn, run_id)
                committing = True  # leaving the block commits
        except Exception as exc:
            if not committing or not connection_lost(exc):
                raise
            answered, task = self._row_when_back(run_id)
            if not answered or task is None:
                raise
            log.info("run %s: its commit went through unanswered (%s); accepted", run_id, type(exc).__name__)

    def _register(self, run: Run) -> None:
        run.save = lambda key, value: self._save(run, key, value)
        with self._lock:
            self._live[run.id] = run
            if self._beating is None:
                self._beating = threading.Thread(target=self._heartbeat, name="run-heartbeat", daemon=True)
                self._beating.start()
        self.store.start(run)

    def _execute(self, run: Run, produce: Callable[[Run], Outcome]) -> None:
        outcome = Outcome("failed")
        try:
            outcome = Outcome("abandoned") if run.abandoned else produce(run)
        except RunAbandoned:
            outcome = Outcome("abandoned")
        except Exception:  # noqa: BLE001 - produce settles its own errors; this is a last resort
            log.exception("run %s failed unexpectedly", run.id)
        finally:
            if outcome.status != "completed" and run.abandoned:
                outcome = Outcome("abandoned")  # whatever it failed with, another process goes on with the run
            if outcome.status != "abandoned":
                if outcome.status != "completed":  # a completed run's row was settled with its changes (seal)
                    self._settle_row(run, outcome.status)
                self._keep(run, list(run.frames), outcome)  # before its end: a client told it ended can replay it
                self.store.finish(run, outcome.status, outcome.error)
            run.finish(outcome)
            with self._lock:
                if self._live.get(run.id) is run:  # not a later attempt this process took over meanwhile
                    del self._live[run.id]

    def seal(self, conn: Connection, run: Run, status: str) -> None:
        """Settle the run's row in the unit of work that commits its changes:
        they commit only while this attempt holds the lease (exactly once)."""
        self.store.flush()  # its frames are kept before anything says it finished
        if not TaskRepository(conn).finish(run.id, run.attempt, _task_status(status), payload=_settled(run)):
            run.abandon()
            raise RunAbandoned(run.id)

    def _keep(self, run: Run, frames: list[bytes], outcome: Outcome) -> None:
        """Save an ended keyed run's frames and outcome with its Idempotency-Key (`keep`); nothing for another run."""
        if self.keep is None or run.claim is None:
            return
        try:
            self.keep(run.claim, run.id, pack_ended(frames, outcome.status, outcome.error))
        except Exception:  # noqa: BLE001 - its end still goes out; its replays end with Redis's copy
            log.exception("could not save the frames of run %s", run.id)

    def _settle_row(self, run: Run, status: str) -> None:
        try:
            with self.engine.begin() as conn:
                TaskRepository(conn).finish(run.id, run.attempt, _task_status(status), payload=_settled(run))
        except Exception:  # noqa: BLE001 - the lease runs out; the process taking it over settles it
            log.exception("could not settle run %s", run.id)

    def after_outage(self, run: Run) -> Outcome | None:
        """The run's database connection dropped mid-run (`connection_lost`: a PostgreSQL or PgBouncer restart):
        nothing of this attempt committed, unless its commit itself went through. Once the database answers, the
        run is given back and taken over from its saved state, as after a node's loss (no change twice, its
        stream goes on from the frames kept); its views stay open meanwhile. None when the database is still
        away after `outage_seconds` (or fails otherwise): the run fails, with a retryable error."""
        self.store.flush()  # the frames kept so far are the ones the next attempt goes on from
        answered, task = self._row_when_back(run.id)
        if not answered:
            return None
        if task is not None and task.status == "done" and task.attempts == run.attempt:
            return Outcome("completed")  # the connection dropped after its commit went through
        log.info("run %s: its database connection dropped; it is given back", run.id)
        with self._lock:  # not this process's to renew any more (a takeover here registers its own Run)
            if self._live.get(run.id) is run:
                del self._live[run.id]
        run.abandon()  # its views follow the attempt taking it over
        self._release(run.id, run.attempt)  # a no-op if another attempt holds it already (its lease ran out)
        return Outcome("abandoned")

    def _row_when_back(self, run_id: str) -> tuple[bool, TaskRecord | None]:
        """Whether the database answered again within `outage_seconds`, and then the run's row (None: there is
        none)."""
        return read_when_back(self.engine, lambda conn: TaskRepository(conn).get(run_id), self.outage_seconds)

    def _save(self, run: Run, key: str, value: object) -> None:
        with self.engine.begin() as conn:
            if not TaskRepository(conn).save_state(run.id, run.attempt, key, value):
                run.abandon()
                raise RunAbandoned(run.id)

    def emit(self, run: Run, message: Message, *, turn: Turn, committed: bool = False) -> None:
        """A frame of the run (`committed`: one of its result frames, after its changes committed: see
        `Run.emit`). Serializing and keeping it take `turn`, the caller's turn of the process's gate
        (`fair.turn_of`: handed, as a model call's is, never found in the request context), as the model's
        steps do; the operation's own steps between frames do not: they wait on SQL, and a turn held across a
        lock wait deadlocks with the lock's holder waiting for a turn."""
        with turn():
            frame = message.SerializeToString()
            run.emit(frame, lambda seq: self.store.append(run.id, seq, frame, run.kept_up_to), committed)

    # --- views ------------------------------------------------------------------------

    def follow(self, run: Run, after: int, active: Callable[[], bool]
               ) -> tuple[Iterator[Batch], Callable[[], Outcome | None]]:
        """The frames of a run of this process after `after`, in batches as they
        come (every frame there is when the view asks: one write to the client,
        not one per frame), and a function giving the outcome once they are out.
        If this process loses the run, the view goes on with the frames of the
        process taking it over."""
        state: dict[str, Outcome] = {}
        with self._lock:
            live = self._live.get(run.id) is run
        if not live and run.outcome is None:  # submitted to a runner: its frames come through Redis
            return self._poll(ResumePoint(run.id, after), active, state, queued=True), lambda: state.get("outcome")

        def frames() -> Iterator[Batch]:
            seq, keep_alive = after, _keep_alive()
            while True:
                if self._handing_over.is_set():
                    state["outcome"] = Outcome("handed_over")
                    return
                batch, outcome = run.wait(seq, 1.0)
                if batch:
                    yield list(enumerate(batch, seq + 1))
                    seq += len(batch)
                if run.abandoned and not batch:
                    yield from self._poll(ResumePoint(run.id, seq), active, state)
                    return
                if outcome is not None and not batch:
                    state["outcome"] = outcome
                    return
                if not batch and not active():
                    return  # the client went away; the run goes on
                if keep_alive(bool(batch)):
                    yield []

        return frames(), lambda: state.get("outcome")

    def resume(self, point: ResumePoint, caller: RunOwner, method: str, active: Callable[[], bool]
               ) -> tuple[Iterator[Batch], Callable[[], Outcome | None]]:
        """Frames after the resume point, from this process's live run or Redis.
        Returns them and a function giving the outcome once they are out. A
        run the caller may not read answers exactly as one that does not exist."""
        with self._lock:
            live = self._live.get(point.run_id)
        if live is not None and live.owner == caller and live.method == method:
            return self.follow(live, point.seq, active)
        meta = self.store.meta(point.run_id)
        if meta is None:  # no process runs it now: one whose lease ran out is taken over soon
            meta = self._row_meta(point.run_id)
            if meta is not None and meta["status"] != "running":
                meta = None  # settled, and its frames expired
        if meta is None or not caller.owns(meta) or meta.get("method") != method:
            raise NotFound("stream run", {"runId": point.run_id})
        state: dict[str, Outcome] = {}
        return self._poll(point, active, state), lambda: state.get("outcome")

    def _row_meta(self, run_id: str) -> dict[str, str] | None:
        """A run's owner, method and status from its row (Redis forgot it, e.g. while no process runs it)."""
        try:
            with self.engine.connect() as conn:
                task = TaskRepository(conn).get(run_id)
        except Exception as exc:  # noqa: BLE001 - as when Redis is away
            raise _unavailable() from exc
        if task is None or task.kind.partition(":")[0] != RUN_TASK:  # a run of any pool (resumed anywhere)
            return None
        status = {"done": "completed", "failed": "failed"}.get(task.status, "running")
        row = RunRow.of(task)
        return {**row.owner.as_meta(), "method": row.method, "status": status}

    def _poll(self, point: ResumePoint, active: Callable[[], bool], state: dict[str, Outcome],
              queued: bool = False) -> Iterator[Batch]:
        """A run's frames from Redis, read whenever the process keeping them says it kept more (wakeups).
        `queued`: the run was just accepted (no process runs it yet: its row says nothing new for a while).
        When this process drains, the view ends once its client has a frame to resume from: a new stream's
        view first waits for the run's first frame (within the server's stop grace). Ended before it, the
        client had no `Last-Event-ID` to resume with, and a stream still waiting when the grace ran out was
        cut off (503 without Retry-After)."""
        seq, keep_alive = point.seq, _keep_alive()
        row_read = time.monotonic() if queued else 0.0
        redis_away: float | None = None  # since when (monotonic) this view's Redis reads fail
        kept = self.wakeups.watch(point.run_id)
        try:
            while True:
                if self._handing_over.is_set() and seq > 0:
                    state["outcome"] = Outcome("handed_over")
                    return
                kept.clear()  # a wake-up from now on means more to read
                try:
                    meta = self.store.meta(point.run_id)
                    if meta is None and time.monotonic() - row_read >= ROW_POLL:
                        # No process runs it now (it died; another takes it over once its lease runs out).
                        row_read, meta = time.monotonic(), self._row_meta(point.run_id) or {"status": "lost"}
                    frames = self.store.frames(point.run_id, seq)  # after the status: none missed at the end
                except ServiceUnavailable:
                    # Redis is away (a restart, a Sentinel failover; or the database, for the row): the run
                    # goes on meanwhile, so the view waits for it as a run waits for the database, then reads
                    # on from where it was, up to `outage_seconds`. A new stream's run was accepted already: a
                    # 503 would have its client ask for it again, and get a second one.
                    now = time.monotonic()
                    redis_away = now if redis_away is None else redis_away
                    if now - redis_away >= self.outage_seconds or not active():
                        raise
                    if keep_alive(False):
                        yield []
                    kept.wait(wakeups.FALLBACK_SECONDS)
                    continue
                redis_away = None
                status = "running" if meta is None else meta.get("status", "running")
                if frames:
                    yield list(enumerate(frames, seq + 1))
                    seq += len(frames)
                if status != "running" and not frames:
                    state["outcome"] = Outcome(status, _error_of(meta))
                    return
                if keep_alive(bool(frames)):
                    yield []
                if not frames:
                    if not active():
                        return
                    kept.wait(wakeups.FALLBACK_SECONDS)
        finally:
            self.wakeups.unwatch(point.run_id, kept)

    # --- leases -----------------------------------------------------------------------

    def _take_over(self, task: TaskRecord) -> None:
        """Run a run whose lease ran out (its process died or gave it back), from its saved state."""
        adopted = self.adopt(task)
        if adopted is not None:
            self.execute(*adopted)

    def adopt(self, task: TaskRecord) -> tuple[Run, Callable[[Run], Outcome]] | None:
        """A run this process claimed (new, or whose lease ran out), registered here (its lease renewed from
        now on) with the operation that goes on from its saved state; None when there is nothing to run."""
        if self._handing_over.is_set() or self.revive is None:
            self._release(task.id, task.attempts)
            return None
        row = RunRow.of(task)
        ended = self.store.ended(task.id)
        if ended is not None:  # it ended while the database was away (its row could not say so then)
            self._settle_row(Run(task.id, row.owner, row.method, task.attempts), ended)
            return None
        known = self.store.known(task.id)  # before this attempt writes the run's meta again
        run = Run(task.id, row.owner, row.method, task.attempts, row.state, self.store.kept(task.id), row.key)
        if run.attempt > 1:
            log.info("taking over run %s (attempt %d, %d frames kept)", run.id, run.attempt, run.kept)
        # A first attempt (a runner claiming an accepted run) has no earlier frames to go on from.
        run.earlier = (lambda: self.store.frames(run.id, 0)[:run.kept]) if known or run.attempt == 1 else (lambda: None)
        self._register(run)
        try:
            return run, self.revive(row.payload)
        except Exception:  # noqa: BLE001 - e.g. a method this release no longer has
            log.exception("cannot revive run %s", run.id)
            return run, lambda run: Outcome("failed")

    def execute(self, run: Run, produce: Callable[[Run], Outcome]) -> None:
        self._execute(run, produce)

    def lose(self, task: TaskRecord) -> None:
        self._lose(task)

    def _lose(self, task: TaskRecord) -> None:
        """No attempt finished the run: it ends `lost` (nothing of it was committed)."""
        row = RunRow.of(task)
        run = Run(task.id, row.owner, row.method, task.attempts, key=row.key)
        self._settle_row(run, "failed")
        if run.claim is not None and self.store.known(run.id):  # its frames, as its clients saw them
            try:
                self._keep(run, self.store.frames(run.id, 0), Outcome("lost"))
            except ServiceUnavailable:
                pass  # Redis went away meanwhile: nothing known to save
        self.store.finish(run, "lost")

    def _release(self, run_id: str, attempt: int) -> None:
        try:
            with self.engine.begin() as conn:
                TaskRepository(conn).release(run_id, attempt)
        except Exception:  # noqa: BLE001 - then its lease runs out instead
            log.exception("could not give run %s back", run_id)

    def _heartbeat(self) -> None:
        while not self._stopping.wait(self.lease_seconds / 3):
            with self._lock:
                live = list(self._live.values())
            self.store.heartbeat([run.id for run in live])
            try:
                with self.engine.begin() as conn:
                    held = TaskRepository(conn).renew({run.id: run.attempt for run in live}, self.lease_seconds)
            except Exception:  # noqa: BLE001 - the database is away: another process cannot take them either
                _warn.warning("leases", "run leases not renewed: the database is unavailable")
                continue
            for run in live:
                if run.id not in held and run.outcome is None:
                    log.warning("run %s: lease lost; another process goes on with it", run.id)
                    run.abandon()

    def hand_over(self) -> None:
        """Drain (call on SIGTERM, before the stream server stops): take over no
        more runs, give every run of this process back at once (they stop at
        their next frame or save and roll back; another process goes on from
        their saved state), and end this process's open stream views without
        an `end` event so their clients resume elsewhere with `Last-Event-ID`."""
        self._handing_over.set()
        with self._lock:
            live = list(self._live.values())
        for run in live:
            run.abandon()
        self.store.flush()  # the frames kept so far are the ones the next process goes on from
        for run in live:
            self._release(run.id, run.attempt)

    def close(self) -> None:
        """Stop taking runs; give running ones back to other processes."""
        self.hand_over()
        self._stopping.set()
        self._pool.shutdown()
