"""Tables that age out (issue 49): `audit_events` (migration 0032) and `events` (0033) partitioned by
month, by one swap (kernel/data/partition_swap.py) and one job (kernel/transport/partitions.py). The
migration keeps a database's rows (ids, order, keyset pages across partition boundaries), the
previous release's inserts land, the table's job makes months ahead and drops those older than the
retention (explicit times, no waiting), and the downgrade gives every row back to a plain table."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from persona_service.kernel.data import migrate
from persona_service.kernel.data.audit_repository import AuditRepository
from persona_service.kernel.data.embedded import postgres_url
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.outbox_repository import EventRepository
from persona_service.kernel.data.partitions_repository import MonthlyPartitions, Partition, month_after
from persona_service.kernel.transport.partitions import age_out, plan_age_out
from persona_service.registry import MODULES
from persona_service.webhooks.repository import DeliveryQueue
from plan_probe import sorts_in_plan
from sqlalchemy import Connection, Engine, make_url, text

ORG = "org_partitions"
NOW = datetime.now(UTC)
# Rows the previous release wrote: months back, and two at one instant (the keyset's tie on id).
EXISTING = [NOW - timedelta(days=days) for days in (70, 40, 40, 10, 1)]


# The previous release's rows, as its repositories write them: the audit log without `occurred_at` (the
# server's now()) unless a test places a row in time; the event log with its clock's now.
_AUDIT = ("INSERT INTO audit_events (id, org_id, action, outcome, status, request_id, resource_type, resource_id, "
          "error_code, client_ip, details{at}) VALUES (:id, :org, 'persona.create', 'success', 200, 'req', '', '', "
          "'', '', '{{}}'{value})")
_EVENT = ("INSERT INTO events (id, org_id, workspace_id, type, occurred_at, data) "
          "VALUES (:id, :org, 'ws_partitions', 'persona.created', coalesce(CAST(:at AS timestamptz), now()), '{}')")


def _add_audit(conn: Connection, row_id: str, at: datetime | None) -> None:
    timed = {"at": ", occurred_at", "value": ", :at"} if at is not None else {"at": "", "value": ""}
    conn.execute(text(_AUDIT.format(**timed)), {"id": row_id, "org": ORG, "at": at})


def _add_event(conn: Connection, row_id: str, at: datetime | None) -> None:
    conn.execute(text(_EVENT), {"id": row_id, "org": ORG, "at": at})


def _list_audit(conn: Connection, limit: int, after: tuple[datetime, str] | None) -> list[tuple[datetime, str]]:
    return [(r.occurred_at, r.id) for r in AuditRepository(conn).list_page(ORG, None, {}, limit, after)]


def _list_events(conn: Connection, limit: int, after: tuple[datetime, str] | None) -> list[tuple[datetime, str]]:
    return [(r.occurred_at, r.id) for r in EventRepository(conn).list_page(ORG, None, "", "", limit, after)]


@dataclass(frozen=True)
class Ageing:
    table: str
    revision: str  # the swap's
    add: Callable[[Connection, str, datetime | None], None]
    page: Callable[[Connection, int, tuple[datetime, str] | None], list[tuple[datetime, str]]]

    @property
    def before(self) -> str:
        return f"{int(self.revision) - 1:04d}"

    def month(self, start: datetime) -> str:
        return f"{self.table}_p{start:%Y%m}"


TABLES = [Ageing("audit_events", "0032", _add_audit, _list_audit), Ageing("events", "0033", _add_event, _list_events)]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    if os.environ.get("DATABASE_URL"):
        pytest.skip("needs a PostgreSQL server of its own")
    return postgres_url(tmp_path_factory.mktemp("postgres"))


@pytest.fixture(params=TABLES, ids=[t.table for t in TABLES])
def ageing(request) -> Ageing:
    return request.param


@pytest.fixture
def database(server_url, ageing, request) -> Iterator[tuple[str, Engine]]:
    """A database at the revision before the table's swap, holding the previous release's rows."""
    name = f"{ageing.table}_{request.node.originalname.removeprefix('test_')}"[:60]
    admin = make_engine(server_url, pool_size=1)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url, MODULES.migrations, ageing.before)
    engine = make_engine(url, pool_size=1)
    for n, at in enumerate(EXISTING):
        add(engine, ageing, f"old_{n}", at)
    add(engine, ageing, "old_now", None)
    try:
        yield url, engine
    finally:
        engine.dispose()


def add(engine: Engine, ageing: Ageing, row_id: str, at: datetime | None) -> None:
    with engine.begin() as conn:
        ageing.add(conn, row_id, at)


def listed(engine: Engine, ageing: Ageing, limit: int) -> list[tuple[datetime, str]]:
    """Every row of the organization, a keyset page of `limit` at a time (newest first)."""
    found: list[tuple[datetime, str]] = []
    after = None
    while True:
        with engine.connect() as conn:
            page = ageing.page(conn, limit, after)
        found += page
        if len(page) < limit:
            return found
        after = found[-1]


def partitions(engine: Engine, ageing: Ageing) -> list[Partition]:
    with engine.connect() as conn:
        return MonthlyPartitions(conn, ageing.table).partitions()


def bound(engine: Engine, ageing: Ageing) -> datetime:
    """Where the table as it was (now the partition `<table>_legacy`) ends."""
    return next(p.upper for p in partitions(engine, ageing) if p.name == f"{ageing.table}_legacy").astimezone(UTC)


def test_the_migration_keeps_the_rows_and_pages_across_partition_boundaries(database, ageing):
    url, engine = database
    before = listed(engine, ageing, 2)
    migrate.upgrade(url, MODULES.migrations)
    assert listed(engine, ageing, 2) == before  # the same ids, the same order
    end = bound(engine, ageing)
    assert end - NOW >= timedelta(days=2) and end.day == 1
    assert [p.name for p in partitions(engine, ageing)] == [
        f"{ageing.table}_legacy", ageing.month(end), ageing.month(month_after(end))]

    add(engine, ageing, "new_now", None)  # the previous release's insert
    edges = {"last_legacy": end - timedelta(microseconds=1), "first_month": end,
             "mid_month": end + timedelta(days=12), "next_month": month_after(end) + timedelta(hours=1)}
    for row_id, at in edges.items():
        add(engine, ageing, row_id, at)
    with engine.connect() as conn:
        where = dict(conn.execute(text(f"SELECT id, tableoid::regclass::text FROM {ageing.table}")).all())
    assert where["last_legacy"] == where["new_now"] == where["old_0"] == f"{ageing.table}_legacy"
    assert where["first_month"] == where["mid_month"] == ageing.month(end)
    assert where["next_month"] == ageing.month(month_after(end))

    everything = sorted(listed(engine, ageing, 1000), reverse=True)
    assert len(everything) == len(EXISTING) + 2 + len(edges)
    for limit in (1, 2, 3):  # pages ending on either side of each boundary: each row once, in order
        assert listed(engine, ageing, limit) == everything
    assert _sorts(engine, ageing) == []  # a page walks the partitions' indexes in order, sorting nothing


def _sorts(engine: Engine, ageing: Ageing) -> list[str]:
    """The sorts in the plan of a page of the organization's rows, sorts and sequential scans made a last resort."""
    return sorts_in_plan(engine, f"SELECT id FROM {ageing.table} WHERE org_id = :org "
                                 "ORDER BY occurred_at DESC, id DESC LIMIT 3", {"org": ORG})


def test_the_job_makes_months_ahead_and_drops_those_past_the_retention(database, ageing):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = bound(engine, ageing)
    add(engine, ageing, "first_month", end + timedelta(days=3))

    later = month_after(end) + timedelta(days=14)  # within the second month after the migration
    assert age_out(engine, ageing.table, 400, later) == 2  # its two months after: made; nothing old enough to drop
    months = [p.name for p in partitions(engine, ageing)][1:]
    assert months == [ageing.month(m) for m in _months(end, 4)]
    assert age_out(engine, ageing.table, 400, later) == 0  # idempotent

    expired = end + timedelta(days=30)  # the legacy partition ended 30 days before
    age_out(engine, ageing.table, 0, expired)  # 0 days: kept forever
    assert f"{ageing.table}_legacy" in [p.name for p in partitions(engine, ageing)]
    assert age_out(engine, ageing.table, 30, expired) >= 1
    names = [p.name for p in partitions(engine, ageing)]
    assert f"{ageing.table}_legacy" not in names and ageing.month(end) in names
    assert [row_id for _, row_id in listed(engine, ageing, 100)] == ["first_month"]
    add(engine, ageing, "after", expired)  # inserts go on after a drop
    assert len(listed(engine, ageing, 100)) == 2


def test_the_downgrade_gives_every_row_back(database, ageing):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    add(engine, ageing, "in_a_month", bound(engine, ageing) + timedelta(days=1))
    before = listed(engine, ageing, 3)
    command.downgrade(migrate.alembic_config(url, MODULES.migrations), ageing.before)
    assert listed(engine, ageing, 3) == before
    assert partitions(engine, ageing) == []
    add(engine, ageing, "downgraded", None)  # the table as it was takes inserts again
    migrate.upgrade(url, MODULES.migrations)  # and up again
    assert len(listed(engine, ageing, 3)) == len(before) + 1


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


@pytest.mark.parametrize("ageing", [TABLES[1]], ids=["events"])
def test_the_event_log_keeps_its_fan_out_order_and_triggers(database, ageing):
    """`seq` goes on from where the old table's sequence was (the webhook fan-out takes undispatched events
    by seq, oldest first, across the partitions), and the triggers of 0029 hold on the partitioned table:
    an event no endpoint wants is written dispatched, the others wake the workers."""
    url, engine = database
    with engine.begin() as conn:  # (no endpoint here: the rows were written dispatched) as if the worker were behind
        conn.execute(text("UPDATE events SET dispatched_at = NULL"))
        before = DeliveryQueue(conn).lock_undispatched(100)
    migrate.upgrade(url, MODULES.migrations)
    add(engine, ageing, "new_month", bound(engine, ageing) + timedelta(days=1))
    add(engine, ageing, "new_legacy", None)
    with engine.connect() as conn:
        after = DeliveryQueue(conn).lock_undispatched(100)
        new = conn.execute(text("SELECT seq FROM events WHERE id LIKE 'new_%' AND dispatched_at IS NOT NULL")).all()
        triggers = conn.execute(text("SELECT tgname FROM pg_trigger WHERE tgrelid = CAST('events' AS regclass)")).all()
    assert len(before) == len(EXISTING) + 1 and after == before
    assert len(new) == 2 and min(seq for seq, in new) > max(before)
    assert {name for name, in triggers} == {"events_subscribed", "events_notify_outbox"}
