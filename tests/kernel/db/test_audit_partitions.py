"""The audit log ages out (issue 49, migration 0032): `audit_events` partitioned by month.
The migration keeps a database's rows (ids, order, keyset pages across partition boundaries),
the previous release's inserts (no `occurred_at`: the server's now()) land, the job
`audit.partitions` makes months ahead and drops those older than the retention (explicit
times, no waiting), and the downgrade gives every row back to a plain table."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from persona_service.kernel.data import migrate
from persona_service.kernel.data.audit_repository import AuditPartitions, AuditRepository, Partition
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.process.embedded import postgres_url
from persona_service.kernel.transport.audit import age_out, month_after, plan_age_out
from persona_service.registry import MODULES
from sqlalchemy import Engine, make_url, text

BEFORE = "0031"
ORG = "org_audit_partitions"
NOW = datetime.now(UTC)
# Rows the previous release wrote: months back, and two at one instant (the keyset's tie on id).
EXISTING = [NOW - timedelta(days=days) for days in (70, 40, 40, 10, 1)]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    if os.environ.get("DATABASE_URL"):
        pytest.skip("needs a PostgreSQL server of its own")
    return postgres_url(tmp_path_factory.mktemp("postgres"))


def _add(engine: Engine, row_id: str, at: datetime | None) -> None:
    with engine.begin() as conn:
        values = {"occurred_at": at} if at is not None else {}
        AuditRepository(conn).add(id=row_id, org_id=ORG, action="persona.create", outcome="success", status=200,
                                  request_id=f"req-{row_id}", **values)


@pytest.fixture
def database(server_url, request) -> Iterator[tuple[str, Engine]]:
    """A database at the previous revision holding the previous release's rows."""
    name = f"audit_{request.node.name.lower()}"[:60]
    admin = make_engine(server_url, pool_size=1)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url, MODULES.migrations, BEFORE)
    engine = make_engine(url, pool_size=1)
    for n, at in enumerate(EXISTING):
        _add(engine, f"aud_old_{n}", at)
    _add(engine, "aud_old_now", None)  # the server's now(), as every insert has it
    try:
        yield url, engine
    finally:
        engine.dispose()


def listed(engine: Engine, limit: int) -> list[tuple[datetime, str]]:
    """Every row of the organization, a keyset page of `limit` at a time (newest first)."""
    found: list[tuple[datetime, str]] = []
    after = None
    while True:
        with engine.connect() as conn:
            page = AuditRepository(conn).list_page(ORG, None, {}, limit, after)
        found += [(r.occurred_at, r.id) for r in page]
        if len(page) < limit:
            return found
        after = found[-1]


def partitions(engine: Engine) -> list[Partition]:
    with engine.connect() as conn:
        return AuditPartitions(conn).partitions()


def bound(engine: Engine) -> datetime:
    """Where the table as it was (now the partition `audit_events_legacy`) ends."""
    return next(p.upper for p in partitions(engine) if p.name == "audit_events_legacy").astimezone(UTC)


def test_the_migration_keeps_the_rows_and_pages_across_partition_boundaries(database):
    url, engine = database
    before = listed(engine, 2)
    migrate.upgrade(url, MODULES.migrations)
    assert listed(engine, 2) == before  # the same ids, the same order
    end = bound(engine)
    assert end - NOW >= timedelta(days=2) and end.day == 1
    assert [p.name for p in partitions(engine)] == [
        "audit_events_legacy", f"audit_events_p{end:%Y%m}", f"audit_events_p{month_after(end):%Y%m}"]

    _add(engine, "aud_new_now", None)  # the previous release's insert: its occurred_at from the server
    edges = {"aud_last_legacy": end - timedelta(microseconds=1), "aud_first_month": end,
             "aud_mid_month": end + timedelta(days=12), "aud_next_month": month_after(end) + timedelta(hours=1)}
    for row_id, at in edges.items():
        _add(engine, row_id, at)
    with engine.connect() as conn:
        where = dict(conn.execute(text("SELECT id, tableoid::regclass::text FROM audit_events")).all())
    assert where["aud_last_legacy"] == where["aud_new_now"] == where["aud_old_0"] == "audit_events_legacy"
    assert where["aud_first_month"] == where["aud_mid_month"] == f"audit_events_p{end:%Y%m}"
    assert where["aud_next_month"] == f"audit_events_p{month_after(end):%Y%m}"

    everything = sorted(listed(engine, 1000), reverse=True)
    assert len(everything) == len(EXISTING) + 2 + len(edges)
    for limit in (1, 2, 3):  # pages ending on either side of each boundary: each row once, in order
        assert listed(engine, limit) == everything
    assert _sorts(engine) == []  # a page walks the partitions' indexes in order, sorting nothing


def _sorts(engine: Engine) -> list[str]:
    """The sorts in the plan of a page of the organization's log, sorts and sequential scans made a last resort."""
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_sort = off"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = conn.execute(text("EXPLAIN (FORMAT JSON) SELECT id FROM audit_events WHERE org_id = :org "
                                 "ORDER BY occurred_at DESC, id DESC LIMIT 3"), {"org": ORG}).scalar_one()
    nodes, found = [plan[0]["Plan"]], []
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        found += [node["Node Type"]] if "Sort" in node["Node Type"] else []
    return found


def test_the_job_makes_months_ahead_and_drops_those_past_the_retention(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = bound(engine)
    _add(engine, "aud_first_month", end + timedelta(days=3))

    later = month_after(end) + timedelta(days=14)  # within the second month after the migration
    assert age_out(engine, 400, later) == 2  # its two months after: made; nothing old enough to drop
    months = [p.name for p in partitions(engine)][1:]
    assert months == [f"audit_events_p{m:%Y%m}" for m in _months(end, 4)]
    assert age_out(engine, 400, later) == 0  # idempotent

    expired = end + timedelta(days=30)  # the legacy partition ended 30 days before
    age_out(engine, 0, expired)  # 0 days: kept forever
    assert "audit_events_legacy" in [p.name for p in partitions(engine)]
    assert age_out(engine, 30, expired) >= 1
    names = [p.name for p in partitions(engine)]
    assert "audit_events_legacy" not in names and f"audit_events_p{end:%Y%m}" in names
    assert [row_id for _, row_id in listed(engine, 100)] == ["aud_first_month"]
    _add(engine, "aud_after", expired)  # inserts go on after a drop
    assert len(listed(engine, 100)) == 2


def test_the_downgrade_gives_every_row_back(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    _add(engine, "aud_in_a_month", bound(engine) + timedelta(days=1))
    before = listed(engine, 3)
    command.downgrade(migrate.alembic_config(url, MODULES.migrations), BEFORE)
    assert listed(engine, 3) == before
    assert partitions(engine) == []
    migrate.upgrade(url, MODULES.migrations)  # and up again
    assert listed(engine, 3) == before


def _months(start: datetime, count: int) -> list[datetime]:
    months = [start]
    while len(months) < count:
        months.append(month_after(months[-1]))
    return months


def test_the_plan_drops_only_whole_months_past_the_cutoff():
    jan, feb, mar = _months(datetime(2027, 1, 1, tzinfo=UTC), 3)
    parts = [Partition("audit_events_legacy", jan), Partition("audit_events_p202701", feb),
             Partition("audit_events_p202702", mar)]
    now = feb + timedelta(days=400)
    assert plan_age_out(parts, now, 400).drop == ["audit_events_legacy", "audit_events_p202701"]
    assert plan_age_out(parts, now - timedelta(microseconds=1), 400).drop == ["audit_events_legacy"]
    assert plan_age_out(parts, now, 0).drop == []
    assert plan_age_out([Partition("audit_events_rest", None)], now, 400).make == []  # MAXVALUE covers the rest
