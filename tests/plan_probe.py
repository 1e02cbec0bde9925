"""The plans of what a repository call runs, on rows a test adds in a
transaction it rolls back (ANALYZE inside it sees them: the statistics are
the ones those rows make, and are rolled back with them)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, event, text


@contextmanager
def rows_added(engine: Engine, *inserts: str) -> Iterator[Connection]:
    """A connection whose transaction holds these INSERTs (foreign keys and triggers off:
    `session_replication_role = replica`, the embedded server's superuser) and ANALYZE after."""
    with engine.connect() as conn:
        with conn.begin() as transaction:
            conn.execute(text("SET LOCAL session_replication_role = replica"))
            for insert in inserts:
                conn.execute(text(insert))
            conn.execute(text("ANALYZE"))
            try:
                yield conn
            finally:
                transaction.rollback()


def statements_run(conn: Connection, call: Callable[[], Any]) -> list[tuple[str, Any]]:
    """The statements (and their parameters) `call` runs on `conn`."""
    ran: list[tuple[str, Any]] = []

    def record(_conn, _cursor, statement, parameters, _context, _many):
        ran.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(conn, "before_cursor_execute", record)
    return ran


def indexes_used(conn: Connection, call: Callable[[], Any]) -> list[set[str]]:
    """The indexes each statement `call` runs on `conn` reads, as EXPLAIN plans them."""
    plans = [conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {sql}", params).scalar()
             for sql, params in statements_run(conn, call)]
    return [set(_index_names(json.loads(p) if isinstance(p, str) else p)) for p in plans]


def relations_read(conn: Connection, call: Callable[[], Any]) -> list[set[str]]:
    """The relations each statement `call` runs on `conn` scans as it runs (EXPLAIN ANALYZE, in a savepoint
    rolled back: a write is undone): a partition pruned while the statement runs is not among them."""
    found = []
    for sql, params in statements_run(conn, call):
        with conn.begin_nested() as savepoint:
            plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params).scalar()
            savepoint.rollback()
        found.append(set(_scanned(json.loads(plan) if isinstance(plan, str) else plan)))
    return found


def _scanned(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _scanned(item)
    elif isinstance(node, dict):
        plan = node.get("Plan", node)
        if "Relation Name" in plan and plan.get("Actual Loops", 0) > 0:
            yield plan["Relation Name"]
        for child in plan.get("Plans", []):
            yield from _scanned(child)


def _index_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "Index Name" in node:
            yield node["Index Name"]
        for value in node.values():
            yield from _index_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _index_names(value)


def sorts_in_plan(engine: Engine, query: str, params: dict[str, Any]) -> list[str]:
    """The sort nodes in `query`'s plan, with sorts and sequential scans made a last resort: a keyset page that an
    index serves in order has none."""
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_sort = off"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = conn.execute(text(f"EXPLAIN (FORMAT JSON) {query}"), params).scalar_one()
    nodes, found = [plan[0]["Plan"]], []
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        found += [node["Node Type"]] if "Sort" in node["Node Type"] else []
    return found
