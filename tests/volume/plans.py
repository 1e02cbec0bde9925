"""What the API runs on PostgreSQL, and what its plans cost: the statements
come from PostgreSQL's own statement log (every process of the stack, as
sent, with their parameters), and each is EXPLAIN ANALYZEd with its values,
with sequential scans off (so one shows only where no index applies), in a
transaction rolled back. A plan fails when it scans a big table
sequentially, or reads, sorts or counts more rows of it than a page needs
(an index that does not fit the filter, a sort no index serves)."""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

PREFIX = "@@%p@@ "
_ENTRY = re.compile(r"^@@(\d+)@@ ", re.MULTILINE)
_STATEMENT = re.compile(r"^(?:LOG|LOG:)\s+(?:execute [^:]+|statement): (.*)$", re.DOTALL)
_PARAMS = re.compile(r"^DETAIL:\s+[Pp]arameters: (.*)$", re.DOTALL)  # "Parameters" since PostgreSQL 17
_PARAM = re.compile(r"\$(\d+) = ('(?:[^']|'')*'|NULL)")
# A server-side cursor's declaration (psycopg's named cursors): the query is what it declares.
_DECLARE = re.compile(r'^DECLARE\s+"?[\w.-]+"?\s+(?:NO\s+)?(?:SCROLL\s+)?CURSOR\s+(?:WITH(?:OUT)?\s+HOLD\s+)?FOR\s+',
                      re.IGNORECASE)

# The tables the seeded big tenant fills: a plan must not read them whole.
BIG_TABLES = frozenset({
    "personas", "chat_sessions", "chat_messages", "scim_users", "scim_groups", "scim_group_members", "events",
    "webhook_deliveries", "portraits", "audit_events", "marketplace_listings", "listing_tags", "moderation_reviews",
    "users", "memberships",
})
# Rows one scan (or sort) of a big table may touch for one page: a page
# (up to 100) plus slack; the seeded tables hold many times more.
ROW_BUDGET = 300


@dataclass(frozen=True)
class Statement:
    sql: str
    params: dict[int, str]
    pid: str = ""  # the backend's (which process sent it: scripts/replica_throughput.py)

    def literal(self) -> str:
        """The statement with its logged values in place of $n (highest first: $12 before $1)."""
        out = self.sql
        for n in sorted(self.params, reverse=True):
            out = re.sub(rf"\${n}(?!\d)", lambda _m, v=self.params[n]: v, out)
        return out


class StatementLog:
    """PostgreSQL's log of every statement, from a byte offset on."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def enable(self, engine: Engine) -> None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ALTER SYSTEM SET log_statement = 'all'"))
            conn.execute(text(f"ALTER SYSTEM SET log_line_prefix = '{PREFIX}'"))
            conn.execute(text("SELECT pg_reload_conf()"))

    def disable(self, engine: Engine) -> None:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ALTER SYSTEM RESET log_statement"))
            conn.execute(text("ALTER SYSTEM RESET log_line_prefix"))
            conn.execute(text("SELECT pg_reload_conf()"))

    def offset(self) -> int:
        return self.path.stat().st_size

    def since(self, offset: int) -> list[Statement]:
        with self.path.open("rb") as f:
            f.seek(offset)
            body = f.read().decode(errors="replace")
        return list(_statements(body))


def _statements(body: str) -> Iterator[Statement]:
    parts = _ENTRY.split(body)  # ['', pid, message, pid, message, ...]
    pending: dict[str, str] = {}
    for pid, message in zip(parts[1::2], parts[2::2], strict=True):
        message = message.rstrip("\n")
        if m := _STATEMENT.match(message):
            if pid in pending:
                yield Statement(pending.pop(pid), {}, pid)
            pending[pid] = _DECLARE.sub("", m.group(1))
        elif (m := _PARAMS.match(message)) and pid in pending:
            yield Statement(pending.pop(pid), {int(n): v for n, v in _PARAM.findall(m.group(1))}, pid)
    for pid, sql in pending.items():
        yield Statement(sql, {}, pid)


def reads_big_table(sql: str) -> bool:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head not in ("SELECT", "WITH", "UPDATE", "DELETE"):
        return False
    return any(re.search(rf"\b{t}\b", sql) for t in BIG_TABLES)


def violations(engine: Engine, statement: Statement, generic: bool = False) -> list[str]:
    """What is wrong with the statement's plans (empty: nothing). Two plans:
    sorts off (an index must give the order, which is what a page of a big
    table needs) and sorts on (a sort of a few rows an index found is fine;
    on tables this small the planner may prefer one anyway); the statement
    passes if either reads no more than a page. The plans are made for the
    statement's values in place (custom plans); `generic`: for its generic
    plan instead, the one plan for any values (psycopg prepares a statement
    it ran 5 times, and PostgreSQL may then cache one plan for it, where a
    `LIKE $1` or a `status = $1` cannot pick an index or partial index the
    values would)."""
    if generic and not statement.params:
        return []
    found = _violations(engine, statement, sort=False, generic=generic)
    return found if found and _violations(engine, statement, sort=True, generic=generic) else []


def unfit_scans(engine: Engine, statement: Statement) -> list[str]:
    """For a statement that reads all of one user's rows (a DSAR export),
    so more than a page: no big table is scanned sequentially, and each
    index scan fits the filter (its filter drops at most ROW_BUDGET rows)."""
    return list(_unfit(_plan(engine, statement, sort=True)))


def _unfit(node: dict[str, Any]) -> Iterator[str]:
    relation = node.get("Relation Name", "")
    dropped = (node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)) \
        * node.get("Actual Loops", 1)
    if relation in BIG_TABLES and node["Node Type"] == "Seq Scan":
        yield f"Seq Scan on {relation}"
    elif relation in BIG_TABLES and dropped > ROW_BUDGET:
        yield f"{node['Node Type']} on {relation} drops {dropped} rows ({node.get('Index Name', '')})"
    for child in node.get("Plans", []):
        yield from _unfit(child)


def _violations(engine: Engine, statement: Statement, sort: bool, generic: bool = False) -> list[str]:
    return list(_check(_plan(engine, statement, sort, generic)))


def _plan(engine: Engine, statement: Statement, sort: bool, generic: bool = False) -> dict[str, Any]:
    raw = engine.raw_connection()
    try:
        pg = raw.driver_connection  # psycopg's own: no parameter markers parsed (the values are inline)
        pg.execute("SET LOCAL enable_seqscan = off")
        pg.execute(f"SET LOCAL enable_sort = {'on' if sort else 'off'}")
        if generic:
            pg.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            pg.execute(f"PREPARE plan_check AS {statement.sql}")
            values = ", ".join(statement.params[n] for n in sorted(statement.params))
            row = pg.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plan_check({values})").fetchone()
        else:
            row = pg.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement.literal()}").fetchone()
        plan = row[0]
        parents = dict(pg.execute(_PARENTS).fetchall())
    finally:
        raw.rollback()
        if generic:
            raw.invalidate()  # the prepared statement outlives the transaction: not back to the pool
        raw.close()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return _named_by_parents(plan[0]["Plan"], parents)


# Each partition (table or index) and the partitioned one it belongs to (the audit log's months, migration 0032).
_PARENTS = ("SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relkind IN ('p', 'I')")


def _named_by_parents(node: dict[str, Any], parents: dict[str, str]) -> dict[str, Any]:
    """The plan with a partition's scan named by its table and index: a month of a big table is that table."""
    for key in ("Relation Name", "Index Name"):
        if key in node:
            node[key] = parents.get(node[key], node[key])
    for child in node.get("Plans", []):
        _named_by_parents(child, parents)
    return node


def _check(node: dict[str, Any]) -> Iterator[str]:
    kind, relation = node["Node Type"], node.get("Relation Name", "")
    loops = node.get("Actual Loops", 1)
    touched = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
               + node.get("Rows Removed by Index Recheck", 0)) * loops
    if relation in BIG_TABLES:
        if kind == "Seq Scan":
            yield f"Seq Scan on {relation}"
        elif touched > ROW_BUDGET:
            yield f"{kind} on {relation} touches {touched} rows ({node.get('Index Name', '')})"
    if kind in ("Sort", "Incremental Sort"):
        sorted_rows = sum(c.get("Actual Rows", 0) * c.get("Actual Loops", 1) for c in node.get("Plans", []))
        if sorted_rows > ROW_BUDGET:
            yield f"{kind} of {sorted_rows} rows ({', '.join(node.get('Sort Key', []))})"
    if kind == "Aggregate" and node.get("Plans"):
        counted = sum(c.get("Actual Rows", 0) * c.get("Actual Loops", 1) for c in node["Plans"])
        if counted > ROW_BUDGET:
            yield f"Aggregate over {counted} rows"
    for child in node.get("Plans", []):
        yield from _check(child)
