"""The serial oracle: two writes at once must answer as one of the two serial orders would.

An aggregate's table (`Table`) says how to build a fresh aggregate in the state tried (`make`), how to read
its end state through the API, normalised so that ids and timestamps do not count (`read`), and which write
operations touch it (`ops`). For each pair of operations (the same one twice included: the double click),
`check_pair` builds the aggregate three ways from the same fixture: A then B, B then A, and A and B fired
together behind a barrier (repeated `rounds` times, each on a fresh aggregate). The concurrent run passes
only if its answers (status and error code, in A, B order) and its end state equal one serial order's. A
5xx fails whatever the serial runs answered. The serial runs are the oracle: nothing is written down by
hand per pair, so a pair nobody listed is judged the same way.

`ORACLE_ROUNDS` (default 1) sets the repetitions; `ORACLE_REPORT=<file>` appends a JSON line per pair
(pairs covered, rounds, every divergence with what to replay). scripts/serial_oracle.py runs the long form.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

ROUNDS = int(os.environ.get("ORACLE_ROUNDS", "1"))
REPORT = os.environ.get("ORACLE_REPORT", "")

Answer = tuple[int, str]  # status, error code ("" for a success)


@dataclass(frozen=True)
class Op:
    name: str
    call: Callable[[Any], httpx.Response | Answer]  # given the fixture's state (its ids)
    rpc: str = ""  # the write RPC it calls (`writes_covered`)


@dataclass
class Table:
    name: str  # aggregate and state, e.g. "chat session: last reply with alternatives"
    make: Callable[[], Any]
    read: Callable[[Any], Any]
    ops: list[Op]
    pairs: list[tuple[Op, Op]] = field(init=False)

    def __post_init__(self) -> None:
        self.pairs = list(itertools.combinations_with_replacement(self.ops, 2))

    def ids(self) -> list[str]:
        return [f"{a.name}+{b.name}" for a, b in self.pairs]


def answer(response: httpx.Response | Answer) -> Answer:
    if isinstance(response, tuple):  # an operation that read its outcome itself (a stream's in-band error)
        return response
    code = ""
    if response.status_code >= 400:
        try:
            body = response.json()  # the envelope's code; SCIM's error document has its scimType
            code = body.get("error", {}).get("code", "") or body.get("scimType", "") or str(body.get("status", ""))
        except ValueError:
            code = "?"
    return response.status_code, code


@dataclass(frozen=True)
class Run:
    answers: tuple[Answer, Answer]  # A's, B's
    state: Any


def serial(table: Table, first: Op, second: Op, swap: bool) -> Run:
    fixture = table.make()
    one, two = answer(first.call(fixture)), answer(second.call(fixture))
    return Run((two, one) if swap else (one, two), table.read(fixture))


def concurrent(table: Table, a: Op, b: Op) -> Run:
    fixture = table.make()
    barrier = threading.Barrier(2)

    def fire(op: Op) -> Answer:
        barrier.wait(timeout=30)
        return answer(op.call(fixture))

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(fire, a), pool.submit(fire, b)]
        answers = (futures[0].result(timeout=120), futures[1].result(timeout=120))
    return Run(answers, table.read(fixture))


def check_pair(table: Table, a: Op, b: Op, rounds: int = ROUNDS) -> list[str]:
    """Divergences of `rounds` concurrent runs of (a, b) from both serial orders (empty: each was one of them)."""
    orders = [serial(table, a, b, swap=False)]
    if a is b:  # the same operation twice: either call may be the one that came first
        orders.append(Run((orders[0].answers[1], orders[0].answers[0]), orders[0].state))
    else:
        orders.append(serial(table, b, a, swap=True))
    divergences = []
    for n in range(rounds):
        got = concurrent(table, a, b)
        server_error = any(status >= 500 for status, _ in got.answers)
        if server_error or got not in orders:
            divergences.append(json.dumps({
                "round": n, "concurrent": _plain(got), "serial": [_plain(o) for o in orders],
                "replay": f"{table.name}: {a.name} and {b.name} at once",
            }, default=str))
    if REPORT:
        with open(REPORT, "a") as out:
            out.write(json.dumps({"table": table.name, "pair": [a.name, b.name], "rounds": rounds,
                                  "divergences": divergences}) + "\n")
    return divergences


def _plain(run: Run) -> dict:
    return {"answers": run.answers, "state": run.state}


def since() -> datetime:
    """A moment just before a fixture is made: `events` reads back to it (a second early: the host's clock is the
    service's, and an event of the fixture is never older than the fixture)."""
    return datetime.now(UTC) - timedelta(seconds=1)


def events(http: httpx.Client, headers: dict[str, str], after: datetime, match: Callable[[dict[str, Any]], bool],
           **query: Any) -> tuple[str, ...]:
    """The types of the events `match` picks (by their `data`: the aggregate's id), sorted (ids and times aside),
    among those that occurred from `after` on: GET /v1/events (newest first, filtered by `query` such as `type`
    or `personaId`) page by page until an older one. Part of an end state, it tells a write that recorded an
    event twice, or recorded one where no serial order lets it through, from one that recorded it once."""
    found, cursor = [], ""
    while True:
        r = http.get("/v1/events", params={"limit": 100, **query, **({"cursor": cursor} if cursor else {})},
                     headers=headers)
        assert r.status_code == 200, r.text
        page = r.json()
        for event in page["items"]:
            if datetime.fromisoformat(event["occurredAt"]) < after:
                return tuple(sorted(found))
            if match(event.get("data") or {}):
                found.append(event["type"])
        cursor = page.get("nextCursor", "")
        if not cursor:
            return tuple(sorted(found))


def writes_covered(service: Any, tables: list[Table], creates: set[str]) -> set[str]:
    """The write RPCs of `service` (a proto ServiceDescriptor; `(persona.v1.policy).write`) that no table's
    operation calls, bar those in `creates` (they make a new aggregate, so two at once never share one).
    Empty when the oracle tries every write: a write RPC added later fails this until it is in a table."""
    from persona.v1 import options_pb2

    writes = {m.name for m in service.methods if m.GetOptions().Extensions[options_pb2.policy].write}
    return writes - creates - {op.rpc for table in tables for op in table.ops}
