"""The read cache's own rules (kernel/data/read_cache.py), in one process: a hit needs the scope the row was read
for, memory holds `capacity` rows at most (least recently used dropped first), a row read before a write's
eviction is not stored after it, bus messages evict or clear, nothing is served while the bus is down, a row
is registered as held before it is read to be kept and served no longer than its registration lasts.
Across server processes on the real stack: tests/chat/test_session_read_cache.py."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from persona_service.kernel.data import read_cache


@dataclass(frozen=True)
class Row:
    id: str
    version: int


@pytest.fixture(autouse=True)
def held_forever(monkeypatch) -> None:
    """Rows registered as held for good (one process, no bus): not the holder of an App an earlier test made."""
    monkeypatch.setattr(read_cache, "_hold", [lambda _name, _key: math.inf])


@pytest.fixture
def cache() -> Iterator[read_cache.ReadCache[Row]]:
    cache = read_cache.ReadCache[Row]("test")
    cache.capacity, cache.serving = 3, True
    yield cache


@pytest.fixture
def holds(monkeypatch) -> tuple[list[object], list[object]]:
    """What registering a row answers (the next value each time: a deadline or None), and the order of things."""
    answers: list[object] = []
    log: list[object] = []

    def hold(name: str, key: str) -> float | None:
        log.append(("hold", name, key))
        return answers.pop(0) if answers else math.inf  # type: ignore[return-value]

    monkeypatch.setattr(read_cache, "_hold", [hold])
    return answers, log


def counting(rows: dict[str, Row]) -> tuple[list[str], object]:
    loads: list[str] = []

    def load(key: str):
        def read() -> Row | None:
            loads.append(key)
            return rows.get(key)
        return read

    return loads, load


def test_a_hit_needs_the_scope_the_row_was_read_for(cache):
    loads, load = counting({"a": Row("a", 1)})
    assert cache.read("a", "ws_1", load("a")) == Row("a", 1)
    assert cache.read("a", "ws_1", load("a")) == Row("a", 1)
    assert loads == ["a"]
    assert cache.read("a", "ws_2", load("a")) == Row("a", 1)  # another scope reads the database (which filters)
    assert loads == ["a", "a"]


def test_nothing_absent_is_remembered(cache):
    loads, load = counting({})
    assert cache.read("x", "ws", load("x")) is None
    assert cache.read("x", "ws", load("x")) is None
    assert loads == ["x", "x"] and len(cache) == 0


def test_memory_holds_capacity_rows_least_recently_used_dropped_first(cache):
    rows = {key: Row(key, 1) for key in "abcde"}
    loads, load = counting(rows)
    for key in "abc":
        cache.read(key, "ws", load(key))
    cache.read("a", "ws", load("a"))  # a is now the most recently used
    cache.read("d", "ws", load("d"))  # drops b
    assert len(cache) == 3
    loads.clear()
    for key in "acd":
        cache.read(key, "ws", load(key))
    assert loads == []
    cache.read("b", "ws", load("b"))
    assert loads == ["b"]


def test_a_row_read_before_an_eviction_is_not_stored_after_it(cache):
    def racing() -> Row:
        cache.evict(["a"])  # the write commits and its eviction arrives while this read runs
        return Row("a", 1)

    assert cache.read("a", "ws", racing) == Row("a", 1)
    assert len(cache) == 0
    loads, load = counting({"a": Row("a", 2)})
    assert cache.read("a", "ws", load("a")) == Row("a", 2)
    assert cache.read("a", "ws", load("a")) == Row("a", 2) and loads == ["a"]


def test_bus_messages_evict_the_keys_they_name_or_clear_the_cache():
    cache = read_cache.read_cache("bus_test", Row)
    cache.capacity, cache.serving = 10, True
    for key in "abc":
        cache.read(key, "ws", lambda key=key: Row(key, 1))
    read_cache.apply("read:bus_test:a,b")
    assert len(cache) == 1
    read_cache.apply("read:bus_test:")
    assert len(cache) == 0
    read_cache.apply("read:no_such_cache:a")  # another version's cache: nothing to do


def test_nothing_is_served_or_stored_while_the_bus_is_down(cache):
    loads, load = counting({"a": Row("a", 1)})
    cache.read("a", "ws", load("a"))
    cache.serving = False
    cache.read("a", "ws", load("a"))
    assert loads == ["a", "a"]


def test_off_at_capacity_zero(cache):
    cache.capacity = 0
    loads, load = counting({"a": Row("a", 1)})
    cache.read("a", "ws", load("a"))
    cache.read("a", "ws", load("a"))
    assert loads == ["a", "a"] and len(cache) == 0


def test_a_row_is_registered_as_held_before_it_is_read(cache, holds):
    answers, log = holds

    def load() -> Row:
        log.append("load")
        return Row("a", 1)

    cache.read("a", "ws", load)
    cache.read("a", "ws", load)  # a hit: no registration, no read
    assert log == [("hold", "test", "a"), "load"]


def test_a_row_not_registered_is_not_kept(cache, holds):
    answers, _ = holds
    answers.append(None)  # the bus did not take the registration
    loads, load = counting({"a": Row("a", 1)})
    cache.read("a", "ws", load("a"))
    assert len(cache) == 0
    cache.read("a", "ws", load("a"))
    assert loads == ["a", "a"] and len(cache) == 1


def test_a_row_is_served_no_longer_than_its_registration(cache, holds):
    answers, log = holds
    answers.append(time.monotonic() - 1)  # a registration already run out
    loads, load = counting({"a": Row("a", 1)})
    cache.read("a", "ws", load("a"))
    cache.read("a", "ws", load("a"))  # registered again, read again
    assert loads == ["a", "a"] and [entry for entry in log if entry != "load"] == [("hold", "test", "a")] * 2
