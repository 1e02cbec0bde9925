"""CPU per request of the two model-using writes, split by process, and the model's own part of it.

Starts `up` (as scripts/hostile_load.py does), makes an Enterprise organization with its limits lifted and no
webhook endpoint, then for `POST /v1/chat/sessions/{id}/messages` (a reply, not streamed) and
`POST /v1/personas` (a persona's creation) sends N requests one after another and reads each process's CPU
time (utime + stime from /proc/<pid>/stat) before and after: CPU ms per request by process kind — the server
processes, the runners, the webhook worker, Envoy, Redis and PostgreSQL. PostgreSQL's backends are put down
to the process they serve (the other end of a backend's socket, from `ss` and /proc/net/tcp, matched to
the sockets a stack process holds); the postmaster, its auxiliary processes and backends not matched are "postgres (other)".
The stack's background (timers, polls, lease renewals: CPU per second, not per request) is measured at rest for
3 s before each write's window, and its rate times the window is reported apart ("background") and taken off
the total ("net"): on a loaded machine the same requests take longer and counted more of it.

The model's own part: the model calls the measured writes made (what server processes queue in Redis for the
runners, `providers.remote`) are captured with Redis MONITOR while they run, then replayed here, in-process,
against the local provider (`providers.factory.make_base_provider`, what a runner runs), and their CPU
timed (the thread's CPU time per call). The runner's column less that is the runner's handling of the calls
(taking them from Redis, answering, the pool, its PostgreSQL work for runs and tasks). The offline model's
moderation and embeddings of a short text never reach Redis (a server answers them itself: providers.remote), so
they are in the server's column, not in the captured replay. For the chat reply the model's whole work is
replayed as well ("model (whole reply)"): each measured reply's inputs rebuilt from what the service stored (the
voice, the history before it, the message), then its completion, moderation and the drift check's embeddings run
against the local provider and timed, the replayed text checked against the stored reply (`replay_replies`).
MONITOR costs Redis (and nothing else) a little: the Redis column includes it; `--no-capture` measures without
it (and replays nothing).

    .venv/bin/python scripts/measure_model_cpu.py [--chat 200] [--personas 60] [--first-frames 100] [--json out]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Any

import httpx
import redis
from hostile_load import Service

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
KINDS = ("server", "runner", "webhook worker", "envoy", "redis")
CLIENT_KINDS = ("server", "runner", "webhook worker")
PG_KINDS = tuple(f"postgres ({kind})" for kind in CLIENT_KINDS) + ("postgres (other)",)
MODEL_QUEUE = "persona:model:calls:"
MARK = "measure-model-cpu:"
IDLE_SECONDS = 3.0  # the window at rest before each write's, for the stack's background CPU


def _cpu_ms(pid: int) -> float:
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_MS  # utime, stime


def _children(pid: int) -> list[int]:
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        children = task / "children"
        if children.exists():
            found += [int(p) for p in children.read_text().split()]
    return found


def _stack_processes(service: Service) -> dict[str, list[int]]:
    state = json.loads((service.data_dir / "stack-pids.json").read_text())
    kinds: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for pid in state["pids"]:
        try:
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except FileNotFoundError:
            continue
        if b"serve" in argv:
            kinds["server"].append(pid)
        elif b"runner" in argv:
            kinds["runner"].append(pid)
        elif b"worker" in argv:
            kinds["webhook worker"].append(pid)
        elif comm == "envoy":
            kinds["envoy"].append(pid)
        elif "redis" in comm:
            kinds["redis"].append(pid)
    return kinds


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except (FileNotFoundError, PermissionError):
        pass
    return found


def _peers() -> dict[str, str]:
    """Socket inode -> the inode of the socket at its other end (local connections: Unix and TCP)."""
    peers = {}
    for line in subprocess.run(["ss", "-xanH"], capture_output=True, text=True).stdout.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[5].isdigit() and fields[7].isdigit() and fields[7] != "0":
            peers[fields[5]] = fields[7]
    ends: dict[tuple[str, str], str] = {}  # (local address, remote address) -> inode
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = pathlib.Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            ends[(fields[1], fields[2])] = fields[9]
    for (local, remote), inode in ends.items():
        other = ends.get((remote, local))
        if other is not None:
            peers[inode] = other
    return peers


class Postgres:
    """The embedded PostgreSQL's processes, each backend put down to the stack process on the other end of its
    connection."""

    def __init__(self, service: Service) -> None:
        state = json.loads((service.data_dir / "stack-pids.json").read_text())
        self.postmaster = int((pathlib.Path(state["postgres_data"]) / "postmaster.pid").read_text().split()[0])

    def owners(self, stack: dict[str, list[int]]) -> dict[int, str]:
        peers = _peers()
        kind_of_inode = {inode: kind for kind in CLIENT_KINDS for pid in stack[kind] for inode in _socket_inodes(pid)}
        owners = {}
        for pid in _children(self.postmaster):
            for inode in _socket_inodes(pid):
                kind = kind_of_inode.get(peers.get(inode, ""))
                if kind:
                    owners[pid] = kind
        return owners

    def pids(self) -> list[int]:
        return [self.postmaster, *_children(self.postmaster)]


def _stack_env(service: Service, name: str) -> str:
    """A setting `up` hands its processes (the embedded Redis's URL), read from a server's environment."""
    pid = _stack_processes(service)["server"][0]
    for item in pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        key, _, value = item.decode(errors="replace").partition("=")
        if key == name:
            return value
    raise SystemExit(f"{name} not found in the stack's environment")


def _sample(service: Service, pg: Postgres) -> dict[str, dict[int, float]]:
    stack = _stack_processes(service)
    sample = {kind: {pid: _cpu_ms(pid) for pid in pids} for kind, pids in stack.items()}
    owners = pg.owners(stack)
    for kind in PG_KINDS:
        sample[kind] = {}
    for pid in pg.pids():
        owner = owners.get(pid)
        sample[f"postgres ({owner})" if owner else "postgres (other)"][pid] = _cpu_ms(pid)
    return sample


def _per_request(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]], n: int) -> dict[str, float]:
    # A process that exited meanwhile is missed; one that started counts from 0 (it did all its work here). A
    # backend is counted under its owner at the end (one that changed hands, never in a stack, counts whole).
    earlier = {pid: ms for kind in before for pid, ms in before[kind].items()}
    return {kind: sum(ms - earlier.get(pid, 0.0) for pid, ms in after[kind].items()) / n
            for kind in (*KINDS, *PG_KINDS)}


# --- the model calls: captured with MONITOR, replayed in-process -------------------------------------------

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}


def _monitor_args(line: str) -> list[str]:
    """The arguments of one MONITOR line (`<time> [<db> <client>] "arg" "arg" ...`, sdscatrepr-quoted)."""
    body = line.split("] ", 1)[1]
    args, i = [], 0
    while i < len(body):
        if body[i] != '"':
            i += 1
            continue
        i += 1
        out = bytearray()
        while body[i] != '"':
            if body[i] == "\\":
                if body[i + 1] == "x":
                    out += bytes([int(body[i + 2:i + 4], 16)])
                    i += 4
                else:
                    out += _ESCAPES.get(body[i + 1], body[i + 1].encode())
                    i += 2
            else:
                out += body[i].encode()
                i += 1
        args.append(out.decode("utf-8", "replace"))
        i += 1
    return args


class Capture:
    """Every model call queued while it runs, split into phases by the marks the script sends (ECHO)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.phases: dict[str, list[dict[str, Any]]] = {}
        self._phase = ""
        self._seen: set[str] = set()
        self._ready = threading.Event()
        self._done: dict[str, threading.Event] = {}
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        with self.client.monitor() as monitor:
            self._ready.set()
            while True:
                try:
                    raw = monitor.connection.read_response()
                except redis.ConnectionError:  # the stack stopped
                    return
                line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                if "] " not in line:
                    continue
                args = _monitor_args(line)
                if len(args) == 2 and args[0].lower() == "echo" and args[1].startswith(MARK):
                    name = args[1][len(MARK):]
                    if name in self._done:
                        self._done[name].set()
                    else:
                        self._phase = name
                elif len(args) == 3 and args[0].lower() in ("rpush", "lpush") and args[1].startswith(MODEL_QUEUE):
                    call = json.loads(args[2])
                    if call["id"] not in self._seen:  # (a call queued again after its runner died)
                        self._seen.add(call["id"])
                        self.phases.setdefault(self._phase, []).append(call)

    def phase(self, name: str) -> None:
        """The calls queued from now on are `name`'s."""
        self.client.echo(MARK + name)

    def settle(self) -> None:
        """Wait until MONITOR has passed everything sent so far."""
        name = f"settled-{time.monotonic_ns()}"
        self._done[name] = threading.Event()
        self.client.echo(MARK + name)
        self._done[name].wait(30)


def replay(calls: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """CPU ms of running `calls` here against the local provider: total, and by operation."""
    from persona_service.kernel.errors import ApiError
    from persona_service.kernel.models import NO_CALL
    from persona_service.providers.factory import make_base_provider
    from persona_service.providers.remote import _OPERATIONS

    provider = make_base_provider()
    by_op: dict[str, float] = {}
    for call in calls:
        started = time.thread_time()
        try:
            _OPERATIONS[call["op"]](provider, call["args"], NO_CALL)  # the CPU alone: no turn to wait for
        except ApiError:  # a refusal the service answers (moderation, a bad input) costs the model its work all
            pass  # the same; anything else (a changed signature, a bug) ends the measurement, not hides in it
        by_op[call["op"]] = by_op.get(call["op"], 0.0) + 1000 * (time.thread_time() - started)
    return sum(by_op.values()), by_op


class TimedModel:
    """The local provider, each operation's thread CPU added up by operation (the model's own work, nothing of the
    service's around it)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.by_op: dict[str, float] = {}

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.model, name)
        if name not in ("generate", "moderate", "embed"):
            return attribute

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return attribute(*args, **kwargs)
            finally:
                self.by_op[name] = self.by_op.get(name, 0.0) + 1000 * (time.thread_time() - started)
        return timed


def replay_replies(database_url: str, sent: list[tuple[str, str, int | None]]) -> dict[str, Any]:
    """The model's whole work for chat replies, wherever it ran (the server answers the offline model's short
    calls itself, providers.remote: no Redis to capture them from), replayed here from what the service stored.
    `sent`: (session, content, the user message's ordinal; None: refused) in the order sent. Each reply's inputs
    are rebuilt as the service builds them (chat.service: the voice's messages, the history before it, the
    message), then its completion, its moderation and the drift check's embeddings are run against the local
    provider and timed. A replayed reply that differs from the one stored ends the measurement (the replay no
    longer does what the service does)."""
    from persona_service.chat.repository import ChatSessionRepository
    from persona_service.chat.service import HISTORY_MESSAGES, Calibrations, PersonaReplies, Sampling, drift_score
    from persona_service.kernel.data.work import Work
    from persona_service.kernel.models import Message
    from persona_service.personas.directory import PersonaDirectory
    from persona_service.providers.factory import make_base_provider
    from sqlalchemy import create_engine, text

    # A refused reply stored nothing: its history was what the next reply stored in its session had before it.
    after: dict[str, int | None] = {}
    befores: list[int | None] = []
    for session, _, ordinal in reversed(sent):
        befores.append(ordinal if ordinal is not None else after.get(session))
        if ordinal is not None:
            after[session] = ordinal
    befores.reverse()
    model = TimedModel(make_base_provider())
    calibrations = Calibrations(4096)
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    inputs = []
    with engine.connect() as conn:
        repo, personas = ChatSessionRepository(conn), PersonaDirectory(Work.on(conn))
        voices = {}
        for (session, content, ordinal), before in zip(sent, befores):
            if session not in voices:
                persona_id, version = conn.execute(text("SELECT persona_id, persona_version FROM chat_sessions "
                                                        "WHERE id = :id"), {"id": session}).one()
                voices[session] = personas.voice(persona_id, version)
            history = [Message(role, said) for role, said in repo.history_texts(session, HISTORY_MESSAGES, before)]
            stored = None
            if ordinal is not None:
                stored = conn.execute(text("SELECT content, recovered FROM chat_messages WHERE session_id = :s "
                                           "AND ordinal = :o AND selected"), {"s": session, "o": ordinal + 1}).one()
            inputs.append((voices[session], content, history, stored))
    engine.dispose()
    for _ in range(2):  # the first pass calibrates each voice (the servers did it in their warm-up), the second counts
        model.by_op.clear()
        for voice, content, history, stored in inputs:
            messages = [*PersonaReplies.voice_messages(voice), *history, Message("user", content)]
            reply = model.generate(messages, Sampling().options()).text
            if stored is not None and not stored.recovered and reply != stored.content:
                raise SystemExit(f"the replayed reply differs from the one stored: {reply!r} != {stored.content!r}")
            if reply:
                model.moderate(reply)
                drift_score(model, voice, content, reply, calibrations)  # type: ignore[arg-type]
    total = sum(model.by_op.values())
    return {"model (whole reply)": total / len(inputs),
            "model (whole reply) by op": {op: round(ms / len(inputs), 3) for op, ms in model.by_op.items()}}


def measure(service: Service, pg: Postgres, capture: Capture | None, label: str, n: int, send) -> dict[str, Any]:
    if capture:
        capture.phase(f"{label} warm-up")
    for i in range(min(5, n)):  # warm-up: prepared statements, caches, the model's tables
        send(-1 - i)
    if capture:
        capture.phase(label)
    time.sleep(0.3)  # the webhook worker's and the runners' wake-ups after the warm-up, outside the window
    idle = _sample(service, pg)
    time.sleep(IDLE_SECONDS)
    before, started = _sample(service, pg), time.monotonic()
    for i in range(n):
        send(i)
    elapsed = time.monotonic() - started
    time.sleep(0.3)  # what the writes set off in the background (the webhook worker's fan-out) is theirs
    split: dict[str, Any] = _per_request(before, _sample(service, pg), n)
    split["wall"] = 1000 * elapsed / n
    # The stack's own background (timers, polls, renewals) runs per second, not per request: on a loaded machine
    # the window is longer and counts more of it. Its rate, measured at rest just before, times the window.
    split["idle ms/s"] = sum(_per_request(idle, before, 1).values()) / IDLE_SECONDS
    split["background"] = split["idle ms/s"] * (elapsed + 0.3) / n
    if capture:
        capture.phase(f"{label} after")
        capture.settle()
        replay(capture.phases.get(f"{label} warm-up", []))  # the replay's own warm-up, as the runner had
        calls = capture.phases.get(label, [])
        model, by_op = replay(calls)
        split["model"] = model / n
        split["model calls"] = len(calls) / n
        split["model by op"] = {op: round(ms / n, 3) for op, ms in by_op.items()}
    print(f"{label}: {n} requests, {json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in split.items()})}",
          flush=True)
    return split


def first_frames(client: httpx.Client, session: str, n: int) -> None:
    """A stream's first frame at rest: `n` streamed chat replies one after another, the time from sending
    each to its first event (p50/p99)."""
    waits = []
    for i in range(n):
        started = time.monotonic()
        with client.stream("POST", f"/v1/chat/sessions/{session}/messages", params={"stream": "true"},
                           json={"content": f"One more thing, number {i}."}) as r:
            lines = r.iter_lines()
            while not next(lines).startswith("data:"):
                pass
            waits.append(time.monotonic() - started)
            for _ in lines:
                pass
    waits.sort()
    print(f"first frame of a streamed reply at rest ({n}): p50 {1000 * waits[n // 2]:.1f} ms, "
          f"p99 {1000 * waits[min(n - 1, int(n * 0.99))]:.1f} ms", flush=True)


def table(rows: list[tuple[str, dict[str, Any]]]) -> None:
    print()
    print("| request | wall ms | server | runner (model / handling) | webhook worker | Envoy | Redis | PostgreSQL for "
          "server / runner / worker / other | total | of it, background at rest | total less it |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, split in rows:
        total = sum(split[k] for k in (*KINDS, *PG_KINDS))
        model = split.get("model")
        runner = (f"{split['runner']:.1f} ({model:.2f} / {split['runner'] - model:.1f})" if model is not None
                  else f"{split['runner']:.1f}")
        pg = " / ".join(f"{split[k]:.1f}" for k in PG_KINDS)
        print(f"| {name} | {split['wall']:.1f} | {split['server']:.1f} | {runner} | {split['webhook worker']:.1f} "
              f"| {split['envoy']:.1f} | {split['redis']:.1f} | {pg} | {total:.1f} | {split['background']:.1f} "
              f"| {total - split['background']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chat", type=int, default=200, help="chat replies (not streamed)")
    parser.add_argument("--personas", type=int, default=60, help="persona creations")
    parser.add_argument("--first-frames", type=int, default=100, help="streamed replies timed to their first frame")
    parser.add_argument("--no-capture", action="store_true", help="no MONITOR, no replay: the model's part unknown")
    parser.add_argument("--json", type=pathlib.Path, help="also write the splits here")
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, Any]]] = []
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        service = Service(pathlib.Path(tmp) / "data")
        try:
            pg = Postgres(service)
            capture = None if args.no_capture else Capture(_stack_env(service, "REDIS_URL"))
            _, auth = service.org("Measured")
            with httpx.Client(base_url=service.base, headers=auth, timeout=60) as client:
                persona = client.post("/v1/personas", json={"intent": "A ferry pilot who sings"}).json()["id"]
                sessions = [client.post("/v1/chat/sessions", json={"personaId": persona}).json()["sessionId"]
                            for _ in range(10)]

                sent: list[tuple[str, str, int | None]] = []  # the measured replies, for the model's replay

                def reply(i: int) -> None:
                    session, content = sessions[i % len(sessions)], f"How was the crossing today, part {i}?"
                    r = client.post(f"/v1/chat/sessions/{session}/messages", json={"content": content})
                    # (A reply that drifted from the persona's voice is refused, a 4xx, after the same model work.)
                    assert r.status_code < 500, r.text
                    if i >= 0:
                        sent.append((session, content, r.json()["userMessage"]["ordinal"] if r.status_code == 200
                                     else None))

                def create(i: int) -> None:
                    r = client.post("/v1/personas", json={"intent": f"A cartographer number {i} of night markets"})
                    assert r.status_code in (200, 201), r.text

                if args.chat:  # (0: that write is not measured)
                    split = measure(service, pg, capture, "chat reply", args.chat, reply)
                    if not args.no_capture:
                        split.update(replay_replies(_stack_env(service, "DATABASE_URL"), sent))
                        print(f"chat reply, the model's whole work by replay: {split['model (whole reply)']:.3f} ms "
                              f"{json.dumps(split['model (whole reply) by op'])}", flush=True)
                    rows.append(("POST /v1/chat/sessions/{id}/messages", split))
                if args.personas:
                    rows.append(("POST /v1/personas",
                                 measure(service, pg, capture, "persona creation", args.personas, create)))
                if args.first_frames:
                    first_frames(client, sessions[0], args.first_frames)
        finally:
            service.stop()
    load.append(os.getloadavg()[0])
    table(rows)
    print(f"\nload average (1 min) at start / end: {load[0]:.2f} / {load[1]:.2f} on {os.cpu_count()} CPUs")
    if args.json:
        args.json.write_text(json.dumps({"rows": dict(rows), "load": load}, indent=1))


def _value(split: dict[str, Any], key: str) -> float | None:
    total = sum(split[k] for k in (*KINDS, *PG_KINDS))
    if key == "total":
        return total
    if key == "net":  # the total less the stack's background at rest over the same window
        return total - split["background"] if "background" in split else None
    return split.get(key)


def medians(paths: list[pathlib.Path]) -> None:
    """Median and spread of several runs' --json files (`python scripts/measure_model_cpu.py --medians a b c`)."""
    runs = [json.loads(p.read_text()) for p in paths]
    print("load average (1 min) at each run's start / end: " + ", ".join(
        " / ".join(f"{x:.1f}" for x in r["load"]) for r in runs))
    for name in runs[0]["rows"]:
        print(name)
        for key in ("wall", *KINDS, *PG_KINDS, "model", "model (whole reply)", "background", "total", "net"):
            values = [_value(r["rows"][name], key) for r in runs]
            values = [v for v in values if v is not None]
            if values:
                print(f"  {key:22} median {statistics.median(values):6.2f}  min {min(values):6.2f}  max {max(values):6.2f}")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "--medians":
        medians([pathlib.Path(p) for p in sys.argv[2:]])
    else:
        main()
