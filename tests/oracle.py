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

A table file builds its tables with `_table…` functions (called with None clients they give the operations'
names: tests/test_serial_oracle_coverage.py reads them so), parametrizes its pair test with `params` and checks
each pair with `check_named`, and says its tables try every write of the service with `uncovered`. A table whose
fixture is one resource of a new organization (a setting, an API key, a SCIM token, a subscription) is built by
`org_table` and tested by `org_pair_test`.

An operation's body is `body(rpc, ids, distinguishing=…)`: the contract's (scripts/contract_inputs.py, the one reader
of the write RPCs, `uncovered`'s too) with only the fields the end state reads set over it, each said why where it is
set; tests/test_serial_oracle_bodies.py holds that every body a table sends is valid per the contract. A fixture's own
writes (the aggregate's creation, the calls that put it in the state tried) send `fixture_body(rpc, ids, state=…)`:
the generator's body too, with only what the state needs set over it, so a field added to a creation request reaches
the fixtures as well.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import itertools
import json
import os
import pathlib
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

ROUNDS = int(os.environ.get("ORACLE_ROUNDS", "1"))
REPORT = os.environ.get("ORACLE_REPORT", "")
ROOT = pathlib.Path(__file__).resolve().parents[1]

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


def params(table: Table, *leading: Any, prefix: str = "") -> list[Any]:
    """The table's pairs as a pair test's parameters, (*leading, A's name, B's name), each with its id
    `<prefix>A+B` (tests/durations.json schedules by these ids). `table` may be built with None clients."""
    return [pytest.param(*leading, a.name, b.name, id=f"{prefix}{a.name}+{b.name}") for a, b in table.pairs]


def state_params(states: dict[str, Any], table: Callable[[Any], Table]) -> list[Any]:
    """`params` of a table tried in several states, (state, A's name, B's name), ids `<state>:A+B`: `table(value)`
    builds the table of the state named by a key of `states` (with None clients)."""
    return [pair for state, value in states.items() for pair in params(table(value), state, prefix=f"{state}:")]


def check_named(table: Table, a: str, b: str, rounds: int = ROUNDS) -> list[str]:
    """`check_pair` of the table's operations named `a` and `b` (a pair test's parameters)."""
    ops = {op.name: op for op in table.ops}
    return check_pair(table, ops[a], ops[b], rounds)


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


def contract() -> Any:
    """scripts/contract_inputs.py, the one reader of the contract (the write RPCs, their valid bodies), as loaded
    once (by the race hunt or by this)."""
    loaded = sys.modules.get("contract_inputs")
    if loaded is None:
        spec = importlib.util.spec_from_file_location("contract_inputs", ROOT / "scripts" / "contract_inputs.py")
        assert spec is not None and spec.loader is not None
        loaded = sys.modules["contract_inputs"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    return loaded


@functools.cache
def _write_rpcs() -> dict[str, Any]:
    return {rpc.name: rpc for rpc in contract().write_rpcs()}


def body(rpc: str, ids: Mapping[str, str] | None = None, distinguishing: Mapping[str, Any] | None = None,
         rpcs: Mapping[str, Any] | None = None) -> Any:
    """The body an operation sends to the write RPC `rpc`: the generator's valid body (every required field from
    its rules, on the fixture's `ids` by kind where a field names a resource), with `distinguishing` set over it:
    only the fields the aggregate's end-state read depends on, chosen so that the two serial orders read back
    differently (a table says why at each). A required field added to the request message is so filled in every
    pair; a body the contract refuses (an override breaking a rule) fails here, before it is sent. `rpcs`: the
    write RPCs by name, from other descriptors (a test's planted field); default the protos'."""
    write = (rpcs or _write_rpcs())[rpc]
    generated = contract().body(write, dict(ids or {}))
    sent = {**generated, **distinguishing} if distinguishing else generated
    wrong = contract().invalid(write, sent)
    assert not wrong, f"{rpc}: the oracle's body {sent!r} breaks the contract: {wrong}"
    return sent


def fixture_body(rpc: str, ids: Mapping[str, str] | None = None, state: Mapping[str, Any] | None = None,
                 rpcs: Mapping[str, Any] | None = None) -> Any:
    """The body a table's fixture sends to make its aggregate (or put it in the state tried) with the write RPC
    `rpc`: as `body`, the generator's valid body on the fixture's `ids`, judged by the contract before it is sent,
    with `state` set over it: only what the state needs that the generator does not give (a transcript's words the
    end state reads, an address the operations reuse), each said why where it is set."""
    return body(rpc, ids, distinguishing=state, rpcs=rpcs)


def writes_covered(service: str, tables: list[Table], creates: set[str]) -> set[str]:
    """The write RPCs of the persona.v1 service named `service` (scripts/contract_inputs.py's reading of the
    descriptors) that no table's operation calls, bar those in `creates` (they make a new aggregate, so two at once
    never share one). Empty when the oracle tries every write: a write RPC added later fails this until it is in a
    table."""
    writes = {rpc.name for rpc in _write_rpcs().values() if rpc.service == service}
    if not writes:
        raise LookupError(f"no service {service} with writes in persona.v1")
    return writes - creates - {op.rpc for table in tables for op in table.ops}


def uncovered(service: str, tables: list[Table], creates: Iterable[str] = (), only: str = "") -> set[str]:
    """`writes_covered` of the persona.v1 service named `service` (e.g. "ConfigService"), of its RPCs whose names
    contain `only` (a service two aggregates share: "ScimUser", "ScimGroup")."""
    return {name for name in writes_covered(service, tables, set(creates)) if only in name}


def table_builders() -> list[tuple[pathlib.Path, Callable[..., Table]]]:
    """Every table file's `_table…` builders (tests/**/test_*serial_oracle*_http.py), by file, each module imported
    as pytest imports it (its folder's helpers, scim_client, on the path) under a name of its own."""
    found = []
    for path in sorted((ROOT / "tests").glob("**/test_*serial_oracle*_http.py")):
        sys.path.insert(0, str(path.parent))
        try:
            spec = importlib.util.spec_from_file_location(f"_oracle_table_{path.parent.name}_{path.stem}", path)
            assert spec is not None and spec.loader is not None
            module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # (its dataclasses look it up)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        builders = [f for name, f in vars(module).items() if name.startswith("_table") and inspect.isfunction(f)]
        assert builders, f"{path.relative_to(ROOT)} has no _table builder"
        found += [(path, build) for build in builders]
    return found


# --- Tables of one resource of a new organization (a setting, an API key, a SCIM token, a subscription) -------


def org_table(name: str, make: Callable[[Any, Any], Any], read: Callable[[Any, Any], Any],
              ops: Callable[[Any], list[Op]]) -> Callable[[Any, Any], Table]:
    """The `_table` of such a table: built from (http, tenants), its fixture `make(http, tenants)` (a new
    organization's, so that pairs share nothing), its end state `read(http, fixture)`, its operations `ops(http)`."""
    def build(http: Any, tenants: Any) -> Table:
        return Table(name, make=lambda: make(http, tenants), read=lambda f: read(http, f), ops=ops(http))
    return build


def org_pair_test(build: Callable[[Any, Any], Table]) -> Callable[..., None]:
    """The pair test of an `org_table` (a table file names it `test_…`): every pair, parametrized by name."""
    @pytest.mark.parametrize(("a", "b"), params(build(None, None)))
    def test(http: Any, tenants: Any, a: str, b: str) -> None:
        assert check_named(build(http, tenants), a, b) == []
    return test


def new_org(http: httpx.Client, tenants: Any, plan: str, method: str, path: str,
            body: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
    """A new organization on `plan`: its owner's headers, and the answer (200) of its first call, `method` `path`
    (the resource the fixture is made of)."""
    org = tenants(plan=plan)
    r = http.request(method, path, json=body, headers=org.auth)
    assert r.status_code == 200, r.text
    return org.auth, r.json()


def revocations(http: httpx.Client, path: str, headers: dict[str, str]) -> list[tuple[str, bool]]:
    """The organization's credentials listed at `path` (API keys, SCIM tokens): (name, revoked), sorted."""
    r = http.get(path, params={"limit": 100}, headers=headers)
    assert r.status_code == 200, r.text
    return sorted((c["name"], c["revokedAt"] is not None) for c in r.json()["items"])
