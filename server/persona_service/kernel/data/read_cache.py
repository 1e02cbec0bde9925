"""Hot reads served from the process's memory, dropped exactly by the writes that change them.

A read is cached under its row's id with the tenant scope it was read for (the filter of its query: a
workspace): a hit needs the caller's scope to be that one, so one tenant is never answered with another's row.
Authentication and authorization run on every call as before; only the database read is skipped.

Writes: a repository that changes a cached row marks it on its connection (`stale`). Once the transaction has
committed (kernel.data.uow: the unit of work, before the call answers; any other transaction when its connection
goes back to the pool) the marks go out on the invalidation bus (process/invalidations.py `broadcaster`) as one
message, and the bus waits for every server process that holds one of them to confirm it dropped them: when a
write answers, no process serves what it changed. Marks of a transaction that rolled back go out too (a spare
eviction). A process holds a row once it registered as its holder on the bus (`hold`, before it reads the row
to keep it); it serves the row only while that registration lasts.

A read that raced a write: one that read the row before the write committed must not store it after the
write's eviction went by. Each cache counts evictions per stripe of keys; a read stores its row only if its
stripe saw none since before it queried (READ COMMITTED: the query's snapshot is taken after that).

Bounded (an LRU of `read_cache_entries` entries per cache; 0 turns caching off), and off in processes that do
not listen to the bus (runners, one-shot tools) and while the bus is down (its evictions may be lost)."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

from sqlalchemy import event

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

V = TypeVar("V")

PREFIX = "read:"  # a bus message "read:<cache>:<key>,<key>..." evicts those keys; "read:<cache>:" clears it
_MARKS = "persona_read_cache_marks"  # the connection's (kernel.data) info entry holding its marks
_STRIPES = 64
_MAX_KEYS = 1000  # more keys in one transaction (a large erasure) clear the cache instead
# What caches made later start with: the configured capacity; serving once the process listens to the bus.
_state: dict[str, int | bool] = {"capacity": 0, "serving": False}


class ReadCache(Generic[V]):
    """One read's cache: an LRU of `capacity` rows by id, each with the scope it was read for."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.capacity = _state["capacity"]
        self.serving = bool(_state["serving"])  # only while the process listens to the invalidation bus
        self._rows: OrderedDict[str, tuple[Hashable, V, float]] = OrderedDict()  # scope, row, served until
        self._evictions = [0] * _STRIPES
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def read(self, key: str, scope: Hashable, load: Callable[[], V | None]) -> V | None:
        """The row `key` as read for `scope`: from memory, else `load()` (stored when found)."""
        if not (self.capacity and self.serving):
            return load()
        stripe = hash(key) % _STRIPES
        with self._lock:
            cached = self._rows.get(key)
            if cached is not None and cached[0] == scope and cached[2] > time.monotonic():
                self._rows.move_to_end(key)
                self.hits += 1
                return cached[1]
            before = self._evictions[stripe]
            self.misses += 1
        until = _hold[0](self.name, key)  # a holder before the read: a write committing after it evicts here
        row = load()
        if row is not None and until is not None:
            self._store(key, (scope, row, until), stripe, before)
        return row

    def _store(self, key: str, entry: tuple[Hashable, V, float], stripe: int, before: int) -> None:
        with self._lock:
            if self._evictions[stripe] != before or not self.serving:
                return  # a write of this stripe committed meanwhile: `row` may predate it
            self._rows[key] = entry
            self._rows.move_to_end(key)
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)

    def evict(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._evictions[hash(key) % _STRIPES] += 1
                self._rows.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._evictions = [n + 1 for n in self._evictions]
            self._rows.clear()

    def __len__(self) -> int:
        return len(self._rows)


_caches: dict[str, ReadCache[object]] = {}
_broadcast: list[Callable[[str], None]] = []  # the process's bus sender, once installed
# Registers the process as a row's holder on the bus: until when it may serve the row (None: keep it not).
_hold: list[Callable[[str, str], float | None]] = [lambda _name, _key: math.inf]  # (one process, no bus)


def read_cache(name: str, _row: type[V]) -> ReadCache[V]:
    """The process's cache of the read `name`, of `_row` records (made on first use; off until `configure`)."""
    if name not in _caches:
        _caches[name] = ReadCache(name)
    return _caches[name]  # type: ignore[return-value]


def configure(capacity: int, broadcast: Callable[[str], None], engines: list[Engine],
              hold: Callable[[str, str], float | None]) -> None:
    """Set up the process's caches: `capacity` rows each (0: off; a process off the bus passes 0), the
    marks of `engines`' transactions sent with `broadcast` (the bus: applied here and confirmed by every
    server process holding one of them before it returns), a row registered with `hold(cache, key)` before
    it is read to be kept (the monotonic time until which it may be served; None: not kept)."""
    _state["capacity"] = capacity
    _hold[:] = [hold]
    for cache in _caches.values():
        cache.capacity = capacity
        cache.clear()
    _broadcast[:] = [broadcast]
    for engine in engines:
        if not event.contains(engine.pool, "checkin", _checked_in):
            event.listen(engine.pool, "checkin", _checked_in)


def stale(conn: Connection, name: str, *keys: str) -> None:
    """Mark rows of the cache `name` changed by `conn`'s transaction: evicted everywhere once it ends."""
    if keys:
        conn.info.setdefault(_MARKS, {}).setdefault(name, set()).update(keys)


def committed(conn: Connection) -> None:
    """`conn`'s transaction has committed: send its marks (before its call answers)."""
    _send(conn.info.pop(_MARKS, None))


def _checked_in(_dbapi: object, record: object) -> None:
    """A connection back in the pool: its transaction ended; send the marks no unit of work sent."""
    info = getattr(record, "info", None)
    if info:
        _send(info.pop(_MARKS, None))


def _send(marks: dict[str, set[str]] | None) -> None:
    if not marks or not _broadcast:
        return
    for name, keys in marks.items():
        _broadcast[0](PREFIX + name + ":" + (",".join(sorted(keys)) if len(keys) <= _MAX_KEYS else ""))


def apply(message: str) -> None:
    """Apply a bus message (`read:<cache>:<keys>`; no keys: clear the cache)."""
    name, _, keys = message.removeprefix(PREFIX).partition(":")
    cache = _caches.get(name)
    if cache is None:
        return
    if keys:
        cache.evict(keys.split(","))
    else:
        cache.clear()


def serving(up: bool) -> None:
    """The bus is up (serve from the caches, emptied: evictions sent meanwhile were lost) or down (serve
    nothing from them)."""
    _state["serving"] = up
    for cache in _caches.values():
        cache.clear()
        cache.serving = up
