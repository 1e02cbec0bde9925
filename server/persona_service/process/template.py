"""A pre-imported process template (issue 46): a process that imported the service's entry modules once and
forks a child for each service process a stack asks for, so a start costs a fork (0.005-0.1 CPU s) instead of a
fresh interpreter's imports (~1.7 CPU s). Opt-in, for the test suite's stacks (tests/support.py); `up` starts
fresh interpreters, as users run it (docs/test-time.md).

    python -m persona_service.process.template <socket> <module to import>...

The children are the template's: it reaps them and answers, over its Unix socket, their exit status and the
signals sent to them, so the stack holds a `Popen`-like handle (`TemplateChild`). A child sets its session,
directory, environment, log file and cores after the fork, then runs `python -m <module> <args>`'s equivalent
(runpy), outside every frame of the template: its exit, exceptions and exit status are an interpreter's.

What a module decides at import must be what a fresh interpreter of the child would decide: only children whose
Python variables (PYTHON*), added modules (PERSONA_EXTRA_MODULES) and coverage match the template's are forked
(`Template.can_fork`); the rest start fresh. Prometheus' multiprocess mode is on in the template (a folder of its
own), and a child's first metric write, seeing its new pid, reopens the files in its own PROMETHEUS_MULTIPROC_DIR.
The template holds no thread and no gRPC object when it forks (checked before it serves)."""

from __future__ import annotations

import gc
import importlib
import json
import os
import pathlib
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from io import BufferedReader
from typing import Required, TypedDict

from persona_service.process.reaper import alive

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # (kernel.metrics', not imported here: the template sets it first)
# What a fresh interpreter decides at its start or at import from these; a child whose values differ starts fresh.
_DECIDED_AT_START = ("PYTHON", "COVERAGE_", "PERSONA_EXTRA_MODULES", "GRPC_ENABLE_FORK_SUPPORT")
START_SECONDS = 120  # its imports, on a loaded machine (stack.START_SECONDS)


@dataclass(frozen=True)
class Spawn:
    """A child to start: what `subprocess.Popen(argv, env=env, cwd=cwd, stdin=DEVNULL, stdout=log, stderr=STDOUT,
    start_new_session=True)` would start, pinned to `cpus`."""

    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    log_path: str
    cpus: list[int] | None


# The socket's messages, one JSON object a line: the stack's request ("op" and what that op reads) and the
# template's answer to it (a spawn's id and pid, a poll's returncode; nothing to a signal or a stop).
class SpawnFields(TypedDict):
    """A Spawn's fields, as a spawn request carries them."""

    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str
    log_path: str
    cpus: list[int] | None


class Request(TypedDict, total=False):
    op: Required[str]  # "spawn", "poll", "signal", "stop"
    spawn: SpawnFields
    id: int
    signal: int


class Answer(TypedDict, total=False):
    id: int
    pid: int
    returncode: int | None


# --- the template process -----------------------------------------------------------------------


def main(argv: list[str]) -> None:
    socket_path, modules = argv[0], argv[1:]
    scratch = pathlib.Path(socket_path).parent / "template-metrics"
    scratch.mkdir(exist_ok=True)
    # Multiprocess values from the start, as in every child (each has the variable); this folder is the
    # template's own (unlabelled metrics open their files when defined), a child's first write reopens its own.
    os.environ[MULTIPROC_ENV] = str(scratch)
    _preload(modules)
    spawn = None
    try:
        _check_forkable()
        gc.collect()
        gc.freeze()  # the heap's objects are never collected, so a child's collections leave their pages shared
        spawn = _Server(socket_path).serve()
    finally:
        if spawn is None:  # the template's end (in a child it is the child's to run)
            shutil.rmtree(scratch, ignore_errors=True)
    if spawn is not None:
        _run(spawn)


def _preload(modules: list[str]) -> None:
    """The modules its owner names (the service's entry points: the layers and contracts are theirs)."""
    for module in modules:
        importlib.import_module(module)


def _check_forkable() -> None:
    """A fork copies the calling thread only, and gRPC's core must not have started (channels, servers,
    its threads): the template refuses to serve rather than fork a child that could hang on a lock."""
    threads = os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["main"]
    if len(threads) != 1 or threading.active_count() != 1:
        raise SystemExit(f"template: {len(threads)} threads after the imports; it forks with one only")


class _Server:
    """One thread: accepts requests (a JSON line each, answered with one), forks, reaps."""

    def __init__(self, socket_path: str):
        self._path = socket_path
        self._owner = os.getppid()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._selector = selectors.DefaultSelector()
        self._buffers: dict[socket.socket, bytes] = {}
        self._pids: dict[int, int] = {}  # spawn id -> pid, while it is not reaped
        self._codes: dict[int, int] = {}  # spawn id -> exit status (Popen's returncode)
        self._next_id = 0
        self._stopping = False

    def serve(self) -> Spawn | None:
        """Until asked to stop or its owner is gone (None); in a forked child: what that child runs."""
        self._listener.bind(self._path)
        self._listener.listen(64)
        self._selector.register(self._listener, selectors.EVENT_READ)
        spawn = None
        try:
            spawn = self._loop()
        finally:
            if spawn is None:  # the template's end (a child closed its copies at the fork)
                self._close()
                pathlib.Path(self._path).unlink(missing_ok=True)
                self._kill_children()
        return spawn

    def _loop(self) -> Spawn | None:
        while not self._stopping and os.getppid() == self._owner:
            for key, _ in self._selector.select(timeout=0.5):
                if key.fileobj is self._listener:
                    self._accept()
                elif (spawn := self._read(key.fileobj)) is not None:  # type: ignore[arg-type]
                    return spawn
            self._reap()
        return None

    def _close(self) -> None:
        for conn in list(self._buffers):
            conn.close()
        self._selector.close()
        self._listener.close()

    def _accept(self) -> None:
        conn, _ = self._listener.accept()
        self._buffers[conn] = b""
        self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> Spawn | None:
        data = conn.recv(65536)
        if not data:
            self._selector.unregister(conn)
            del self._buffers[conn]
            conn.close()
            return None
        self._buffers[conn] += data
        while b"\n" in self._buffers[conn]:
            line, self._buffers[conn] = self._buffers[conn].split(b"\n", 1)
            request: Request = json.loads(line)
            if request["op"] == "spawn":
                spawn = Spawn(**request["spawn"])
                sys.stdout.flush()  # (nothing of the template's is written twice)
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    self._close()
                    return spawn
                self._next_id += 1
                self._pids[self._next_id] = pid
                answer: Answer = {"id": self._next_id, "pid": pid}
            else:
                answer = self._answer(request)
            conn.sendall(json.dumps(answer).encode() + b"\n")
        return None

    def _answer(self, request: Request) -> Answer:
        self._reap()
        op = request["op"]
        if op == "poll":
            return {"returncode": self._codes.get(request["id"])}
        if op == "signal":  # sent only while not reaped: the pid is still the child's (a zombie at worst)
            pid = self._pids.get(request["id"])
            if pid is not None:
                os.kill(pid, request["signal"])
            return {}
        if op == "stop":
            self._stopping = True
        return {}

    def _kill_children(self) -> None:
        """None outlives the template: its stacks stopped theirs already, unless their owner died (whose
        stacks' reapers stop the rest)."""
        for pid in self._pids.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        for pid in self._pids.values():
            os.waitpid(pid, 0)

    def _reap(self) -> None:
        by_pid = {pid: spawn_id for spawn_id, pid in self._pids.items()}
        while by_pid:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            spawn_id = by_pid.pop(pid, None)
            if spawn_id is not None:
                del self._pids[spawn_id]
                self._codes[spawn_id] = os.waitstatus_to_exitcode(status)


def _run(spawn: Spawn) -> None:
    """In the forked child: become what Popen would have started, then run the module as `python -m` does."""
    os.setsid()  # own session: a terminal's signals reach the stack's owner only, as with start_new_session
    os.chdir(spawn.cwd)
    os.environ.clear()
    os.environ.update(spawn.env)
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = os.open(spawn.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    if spawn.cpus is not None:
        os.sched_setaffinity(0, spawn.cpus)
    sys.argv = ["-m", *spawn.args]  # runpy puts the module's path first, as `python -m` does
    # As in a fresh interpreter, the module runs as __main__ only; an import of it by name imports it again.
    sys.modules.pop(spawn.module, None)
    runpy.run_module(spawn.module, run_name="__main__", alter_sys=True)


# --- the stack's side ---------------------------------------------------------------------------


class TemplateError(RuntimeError):
    pass


class Template:
    """A running template and one connection to it (shared by the threads of its owner: one request at a time)."""

    def __init__(self, socket_path: pathlib.Path, process: subprocess.Popen[bytes], env: dict[str, str]):
        self.socket_path = socket_path
        self.process = process
        self._env = env  # what the template's imports saw
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        self._reader: BufferedReader | None = None

    @classmethod
    def start(cls, directory: pathlib.Path, modules: list[str]) -> Template:
        """A template that imported `modules`, listening in `directory` (its log there too), once it answers."""
        directory.mkdir(parents=True, exist_ok=True)
        socket_path = directory / "template.sock"
        env = {k: v for k, v in os.environ.items() if k != MULTIPROC_ENV}
        with open(directory / "template.log", "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "persona_service.process.template", str(socket_path), *modules],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        template = cls(socket_path, process, env)
        deadline = time.monotonic() + START_SECONDS
        while not socket_path.exists() or not template._answers():
            if process.poll() is not None:
                raise TemplateError(f"the process template exited ({process.returncode}); see {directory}/template.log")
            if time.monotonic() > deadline:
                template.stop()
                raise TemplateError("the process template did not start")
            time.sleep(0.05)
        return template

    def _answers(self) -> bool:
        try:
            self.call({"op": "poll", "id": 0})
        except OSError:
            return False
        return True

    def can_fork(self, argv: list[str], env: dict[str, str]) -> bool:
        """Whether a fork of the template is what `argv` with `env` would start: `python -m persona_service...`
        on this interpreter, multiprocess metrics on, and what is decided at start or import the same."""
        if len(argv) < 3 or argv[0] != sys.executable or argv[1] != "-m" or not argv[2].startswith("persona_service"):
            return False
        if not env.get(MULTIPROC_ENV) or self.process.poll() is not None:
            return False
        keys = {k for k in (*env, *self._env) if k.startswith(_DECIDED_AT_START)}
        return all(env.get(k) == self._env.get(k) for k in keys)

    def spawn(
        self, argv: list[str], env: dict[str, str], log_path: pathlib.Path, cpus: set[int] | None = None
    ) -> TemplateChild:
        with open(log_path, "ab"):  # as Popen's caller opens it: a log that cannot be written fails here
            pass
        spawn: SpawnFields = {"module": argv[2], "args": argv[3:], "env": dict(env), "cwd": os.getcwd(),
                              "log_path": str(log_path), "cpus": sorted(cpus) if cpus else None}
        answer = self.call({"op": "spawn", "spawn": spawn})
        return TemplateChild(self, answer["id"], answer["pid"], argv)

    def call(self, request: Request) -> Answer:
        with self._lock:
            try:
                # Both kept only once connected (a refused connect leaves nothing to close), and dropped together.
                if self._conn is None or self._reader is None:
                    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    try:
                        conn.connect(str(self.socket_path))
                    except OSError:
                        conn.close()
                        raise
                    self._conn, self._reader = conn, conn.makefile("rb")
                self._conn.sendall(json.dumps(request).encode() + b"\n")
                line = self._reader.readline()
                if not line:
                    raise ConnectionError("the process template closed the connection")
                answer: Answer = json.loads(line)
                return answer
            except OSError:
                self._disconnect()
                raise

    def _disconnect(self) -> None:
        if self._conn is not None:
            if self._reader is not None:
                self._reader.close()
            self._conn.close()
            self._conn, self._reader = None, None

    def stop(self, timeout: float = 10) -> None:
        """Stop the template (its children are their stacks' to stop)."""
        try:
            self.call({"op": "stop"})
        except OSError:
            self.process.terminate()
        with self._lock:
            self._disconnect()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class TemplateChild:
    """What the stack holds of a child the template forked, as of a `subprocess.Popen`: its pid, its exit
    status (the template reaps it and answers it) and the signals sent to it (by the template, which has not
    reaped it yet: the pid is still the child's)."""

    def __init__(self, template: Template, spawn_id: int, pid: int, args: list[str]):
        self._template = template
        self._id = spawn_id
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self._template.call({"op": "poll", "id": self._id})["returncode"]
            except OSError:  # the template is gone, and with it the status: a child gone is reported killed
                self.returncode = None if alive(self.pid) else -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(pause)
            pause = min(0.05, pause * 2)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            self._template.call({"op": "signal", "id": self._id, "signal": int(sig)})

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
