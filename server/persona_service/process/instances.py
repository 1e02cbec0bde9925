"""Where a running `persona-service up` can be found from another shell.

`up` writes `runtime.json` in its data dir (its pid, URL, database and Redis
URLs; 0600, since an external DATABASE_URL may hold a password) and a pointer
to that data dir under `$XDG_STATE_HOME/persona-service/instances/` (default
`~/.local/state`). Commands that act on the running instance's database
(`bootstrap`, `mint-jwt`, `status`) use it when no PERSONA_DATA_DIR or
DATABASE_URL says otherwise, and refuse with a clear message when none runs,
instead of starting a second embedded database that the service never reads.
They act only on the instance of the current directory's data dir: one
started from another checkout is named, never used, so a quick start here
cannot create an organization in someone else's database.

While it starts, `up` keeps `starting.json` in the data dir (its pid and, if
the start fails, why), so that `status --wait` can say at once that `up`
stopped instead of waiting out its timeout.

From its first moment to its exit, `up` holds a lock on `up.lock` in the data
dir (`claim`): a second `up` on the same data dir says that one runs there and
its pid, instead of clashing on its ports or writing over its records. The
kernel drops the lock with the process, however it ends (a SIGKILL too).

`runtime.json` also holds the model providers `up` checked at start
(providers.preflight: their URLs and keys), so that `status` asks the same
servers again with the same keys; a secret like an external DATABASE_URL's
password, hence the file's mode."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import time
from dataclasses import asdict, dataclass, field, replace
from typing import IO

from persona_service.process.reaper import alive

RUNTIME_FILE = "runtime.json"
STARTING_FILE = "starting.json"
LOCK_FILE = "up.lock"


class NoInstance(RuntimeError):
    """No instance runs on this directory's data dir (any running elsewhere are named)."""


@dataclass(frozen=True)
class Instance:
    pid: int
    data_dir: str
    http_url: str
    database_url: str
    redis_url: str
    # The model providers `up` checked (providers.preflight.Probe.to_json); none when all are local.
    providers: tuple[dict[str, str], ...] = field(default=())
    # The models it runs that have no price (providers.pricing): their costs are reported unknown, not $0.
    unpriced: tuple[str, ...] = field(default=())


def _registry() -> pathlib.Path:
    state = os.environ.get("XDG_STATE_HOME") or str(pathlib.Path.home() / ".local" / "state")
    return pathlib.Path(state) / "persona-service" / "instances"


def _pointer(data_dir: str) -> pathlib.Path:
    return _registry() / (hashlib.sha256(data_dir.encode()).hexdigest()[:16] + ".json")


def _write_private(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.touch(mode=0o600)
    tmp.write_text(text)
    tmp.replace(path)


@dataclass(frozen=True)
class Start:
    """An `up` that has not announced an instance (yet): its pid, when this was
    recorded (time.time()) and, once its start failed, why."""

    pid: int
    at: float
    error: str | None = None

    def failure(self) -> str | None:
        """Why this start will never be ready, or None while it may still be."""
        if self.error is not None:
            return self.error
        if not alive(self.pid):
            return f"it exited (pid {self.pid}) before it was ready; its output and the logs under the data dir say why"
        return None


class AlreadyRunning(RuntimeError):
    """Another `up` holds this data dir."""


# The lock of the data dir this process runs `up` on: held open until the process exits.
_CLAIMED: list[IO[str]] = []


def claim(data_dir: pathlib.Path) -> None:
    """Take the data dir for this `up` (its lock file, kept open until this process exits), or raise
    AlreadyRunning naming the `up` that holds it: its pid, and its URL once it is ready."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        instance = read(data_dir)
        pid = instance.pid if instance is not None else int(holder) if holder.isdigit() else None
        where = (f"serving {instance.http_url}" if instance is not None else "still starting")
        raise AlreadyRunning(
            f"Persona Service is already running here (pid {pid if pid is not None else 'unknown'}, {where}, "
            f"PERSONA_DATA_DIR={data_dir}). Use that one (`persona-service status`), stop it first (Ctrl-C where "
            f"it runs, or kill -INT {pid or '<pid>'}), or start another with its own PERSONA_DATA_DIR and "
            "ports.") from None
    except OSError:  # a file system without locks (some network ones): nothing to tell a second `up` by
        lock.close()
        return
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    _CLAIMED.append(lock)


def record_start(data_dir: pathlib.Path, error: str | None = None) -> None:
    """This process is starting an instance on `data_dir` (or, with `error`, failed to)."""
    start = Start(os.getpid(), time.time(), error)
    _write_private(data_dir.resolve() / STARTING_FILE, json.dumps(asdict(start)))


def read_start(data_dir: pathlib.Path) -> Start | None:
    try:
        return Start(**json.loads((data_dir / STARTING_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def announce(instance: Instance) -> None:
    """Record a started instance (its data dir made absolute, so that other shells find it from anywhere)."""
    instance = replace(instance, data_dir=str(pathlib.Path(instance.data_dir).resolve()))
    _write_private(pathlib.Path(instance.data_dir) / RUNTIME_FILE, json.dumps(asdict(instance)))
    _write_private(_pointer(instance.data_dir), json.dumps({"dataDir": instance.data_dir}))
    (pathlib.Path(instance.data_dir) / STARTING_FILE).unlink(missing_ok=True)


def withdraw(data_dir: str) -> None:
    data_dir = str(pathlib.Path(data_dir).resolve())
    for path in (pathlib.Path(data_dir) / RUNTIME_FILE, _pointer(data_dir), pathlib.Path(data_dir) / STARTING_FILE):
        path.unlink(missing_ok=True)


def read(data_dir: pathlib.Path) -> Instance | None:
    """The instance running on this data dir, if one is."""
    try:
        found = Instance(**json.loads((data_dir / RUNTIME_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return found if alive(found.pid) else None


def running() -> list[Instance]:
    """Every live instance this user started (stale pointers are dropped)."""
    found = []
    for pointer in sorted(_registry().glob("*.json")) if _registry().is_dir() else ():
        try:
            data_dir = pathlib.Path(json.loads(pointer.read_text())["dataDir"])
        except (OSError, ValueError, KeyError):
            continue
        instance = read(data_dir)
        if instance is None:
            pointer.unlink(missing_ok=True)
        else:
            found.append(instance)
    return found


def locate(default_data_dir: pathlib.Path) -> Instance:
    """The instance a command should act on: the one on this directory's data
    dir; NoInstance (naming any instance running elsewhere) otherwise."""
    here = read(default_data_dir)
    if here is not None:
        return here
    others = running()
    if not others:
        raise NoInstance("no running Persona Service found. Start it (`make up`, or `persona-service up`) and "
                         "run this again, or point this command at a database with PERSONA_DATA_DIR or DATABASE_URL.")
    listed = "; ".join(f"{i.http_url} (PERSONA_DATA_DIR={i.data_dir})" for i in others)
    raise NoInstance(f"no Persona Service runs on this directory's data dir ({default_data_dir.resolve()}); "
                     f"running elsewhere: {listed}. Set PERSONA_DATA_DIR to act on one of those.")
