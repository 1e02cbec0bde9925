"""Webhook deliveries age out (issue 49): `webhook_deliveries` and `webhook_attempts` partitioned by month
(migration 0034, the shared swap of kernel/data/partition_swap.py) and kept by the module's job
`webhooks.partitions`. On a database holding the previous release's deliveries and attempts: the
migration keeps them (ids, order, attempts), keyset pages cross the partition boundaries, the previous
release's writes land (but its fan-out, which names the old conflict target), the fan-out stays one
delivery per (endpoint, event), an endpoint's DELETE still takes its deliveries and attempts, the job
makes months ahead and drops those past the retention while recent deliveries stay, giving way to the
fan-out meanwhile, and the downgrade gives every row back. Times are explicit: nothing waits on a clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from alembic import command
from partition_db import (
    database_at,
    legacy_bound,
    month_of,
    own_server,
    partition_names,
    partition_of,
    while_a_writer_waits,
)
from persona_service.kernel.data import migrate
from persona_service.kernel.data.partitions_repository import month_after
from persona_service.registry import MODULES
from persona_service.webhooks.module import MODULE
from persona_service.webhooks.records import Subscription
from persona_service.webhooks.repository import DeliveryQueue, WebhookRepository
from persona_service.webhooks.worker import DeliveryWorker
from plan_probe import sorts_in_plan
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import ProgrammingError

BEFORE = "0033"  # the revision before the swap
WORKSPACE, ENDPOINT = "ws_wh_partitions", "whe_partitions"
TABLES = ("webhook_deliveries", "webhook_attempts")
NOW = datetime.now(UTC)
# Deliveries the previous release made: months back, and two at one instant (the keyset's tie on id).
EXISTING = [NOW - timedelta(days=days) for days in (70, 40, 40, 10, 1, 0)]

# The previous release's statements, as its DeliveryQueue and WebhookService ran them.
_OLD_FAN_OUT = text("""
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, next_attempt_at,
                                    created_at)
    VALUES (:id, :endpoint, :event, 'persona.created', 'pending', 0, :at, :at)
    ON CONFLICT (endpoint_id, event_id) WHERE replay_of IS NULL DO NOTHING""")
_OLD_REPLAY = text("""
    INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, next_attempt_at,
                                    replay_of, created_at)
    VALUES (:id, :endpoint, :event, 'persona.created', 'pending', 0, :at, :original, :at)""")
_OLD_ATTEMPT = text("""
    INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, status_code, latency_ms, response_body, error,
                                  success)
    VALUES (:delivery, :attempt, :at, 500, 12, 'no', '', false)""")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    return own_server(tmp_path_factory)


@pytest.fixture
def database(server_url, request) -> Iterator[tuple[str, Engine]]:
    """A database at the revision before the swap, holding the previous release's deliveries, each with
    two attempts (the second an hour after the first)."""
    url, engine = database_at(server_url, "wh_" + request.node.name.removeprefix("test_"), BEFORE)
    with engine.begin() as conn:
        # (an endpoint of no organization: what the deliveries' tables need is the endpoint row)
        conn.execute(text("SET LOCAL session_replication_role = replica"))
        conn.execute(text(
            "INSERT INTO webhook_endpoints (id, org_id, workspace_id, url, description, events, enabled, secret_enc, "
            "secret_created_at) VALUES (:id, 'org_wh_partitions', :ws, 'https://example.com/hook', '', "
            "ARRAY['*'], true, 'sealed', now())"), {"id": ENDPOINT, "ws": WORKSPACE})
    for n, at in enumerate(EXISTING):
        old_delivery(engine, f"whd_old_{n}", f"evt_old_{n}", at)
    try:
        yield url, engine
    finally:
        engine.dispose()


def old_delivery(engine: Engine, delivery_id: str, event_id: str, at: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(_OLD_FAN_OUT, {"id": delivery_id, "endpoint": ENDPOINT, "event": event_id, "at": at})
        for attempt in (1, 2):
            conn.execute(_OLD_ATTEMPT, {"delivery": delivery_id, "attempt": attempt,
                                        "at": at + timedelta(hours=attempt - 1)})


def fan_out(engine: Engine, delivery_id: str, event_id: str, occurred_at: datetime) -> None:
    """This release's fan-out of one event to the endpoint (its created_at: the event's)."""
    with engine.begin() as conn:
        DeliveryQueue(conn).add_deliveries([delivery_id], [Subscription(event_id, "persona.created", ENDPOINT,
                                                                        occurred_at)], NOW)


def listed(engine: Engine, limit: int) -> list[tuple[datetime, str]]:
    """Every delivery of the endpoint, a keyset page of `limit` at a time (newest first), as the API walks."""
    found: list[tuple[datetime, str]] = []
    after = None
    while True:
        with engine.connect() as conn:
            page = WebhookRepository(conn).deliveries_page(ENDPOINT, "", limit, after)
        found += [(d.created_at, d.id) for d in page]
        if len(page) < limit:
            return found
        after = found[-1]


def attempts(engine: Engine) -> dict[str, list[int]]:
    ids = [row_id for _, row_id in listed(engine, 1000)]
    with engine.connect() as conn:
        return {d: [a.attempt for a in found] for d, found in WebhookRepository(conn).attempts_for(ids).items()}


def test_the_migration_keeps_deliveries_and_attempts_and_pages_across_partition_boundaries(database):
    url, engine = database
    before, tried = listed(engine, 2), attempts(engine)
    migrate.upgrade(url, MODULES.migrations)
    assert listed(engine, 2) == before and attempts(engine) == tried  # the same ids, order and attempts
    end = legacy_bound(engine, "webhook_deliveries")
    assert end - NOW >= timedelta(days=2) and end.day == 1 and legacy_bound(engine, "webhook_attempts") == end
    for table in TABLES:
        assert partition_names(engine, table) == [f"{table}_legacy", month_of(table, end), month_of(table, month_after(end))]

    # the previous release's replay and attempts land; its fan-out names a conflict target that is gone
    with engine.begin() as conn:
        conn.execute(_OLD_REPLAY, {"id": "whd_replay", "endpoint": ENDPOINT, "event": "evt_old_0", "at": NOW,
                                   "original": "whd_old_0"})
        conn.execute(_OLD_ATTEMPT, {"delivery": "whd_replay", "attempt": 1, "at": NOW})
    with pytest.raises(ProgrammingError, match="no unique or exclusion constraint"):
        old_delivery(engine, "whd_old_fan_out", "evt_new", NOW)

    edges = {"last_legacy": end - timedelta(microseconds=1), "first_month": end,
             "mid_month": end + timedelta(days=12), "next_month": month_after(end) + timedelta(hours=1)}
    for name, at in edges.items():
        fan_out(engine, f"whd_{name}", f"evt_{name}", at)
        fan_out(engine, f"whd_{name}_again", f"evt_{name}", at)  # the same (endpoint, event): ignored
    delivered = partition_of(engine, "webhook_deliveries", "id")
    assert not any(row_id.endswith("_again") for row_id in delivered)
    assert delivered["whd_last_legacy"] == delivered["whd_replay"] == "webhook_deliveries_legacy"
    assert delivered["whd_first_month"] == delivered["whd_mid_month"] == month_of("webhook_deliveries", end)
    assert delivered["whd_next_month"] == month_of("webhook_deliveries", month_after(end))

    everything = sorted(listed(engine, 1000), reverse=True)
    assert len(everything) == len(EXISTING) + 1 + len(edges)
    for limit in (1, 2, 3):  # pages ending on either side of each boundary: each delivery once, in order
        assert listed(engine, limit) == everything
    assert _sorts(engine) == []  # a page walks the partitions' indexes in order, sorting nothing


def _sorts(engine: Engine) -> list[str]:
    """The sorts in the plan of a page of the endpoint's deliveries, sorts and sequential scans a last resort."""
    return sorts_in_plan(engine, "SELECT id FROM webhook_deliveries WHERE endpoint_id = :e "
                                 "ORDER BY created_at DESC, id DESC LIMIT 3", {"e": ENDPOINT})


def _job(engine: Engine, now: datetime) -> int:
    """The module's job `webhooks.partitions` at `now` (default retention: 30 days)."""
    job = next(j for j in MODULE.jobs if j.name == "webhooks.partitions")
    return job.run(SimpleNamespace(engine=engine, clock=lambda: now))  # type: ignore[arg-type]


def test_the_job_makes_months_ahead_and_drops_those_past_the_retention(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "webhook_deliveries")
    fan_out(engine, "whd_recent", "evt_recent", end + timedelta(days=3))
    with engine.begin() as conn:  # attempted in its month, and (a retry past midnight) in the next
        conn.execute(_OLD_ATTEMPT, {"delivery": "whd_recent", "attempt": 1, "at": end + timedelta(days=3)})
        conn.execute(_OLD_ATTEMPT, {"delivery": "whd_recent", "attempt": 2, "at": month_after(end)})

    later = end + timedelta(days=10)  # within the first month after the migration's
    assert _job(engine, later) == 2  # each table's month after its two: made; nothing old enough to drop
    for table in TABLES:
        months = [end, month_after(end), month_after(month_after(end))]
        assert partition_names(engine, table) == [f"{table}_legacy", *(month_of(table, m) for m in months)]
    assert _job(engine, later) == 0  # idempotent

    expired = end + timedelta(days=30)  # the legacy partitions ended 30 days before
    assert _job(engine, expired) >= 2  # the legacy partition of each table (and a month ahead, as the date has it)
    for table in TABLES:
        assert f"{table}_legacy" not in partition_names(engine, table) and month_of(table, end) in partition_names(engine, table)
    assert [row_id for _, row_id in listed(engine, 100)] == ["whd_recent"]
    assert attempts(engine) == {"whd_recent": [1, 2]}
    fan_out(engine, "whd_after", "evt_after", expired)  # fan-out goes on after a drop
    assert len(listed(engine, 100)) == 2


def _fan_out(delivery_id: str, at: datetime) -> Callable[[Connection], None]:
    def write(conn: Connection) -> None:
        DeliveryQueue(conn).add_deliveries([delivery_id], [Subscription(f"evt_{delivery_id}", "persona.created",
                                                                        ENDPOINT, at)], NOW)
    return write


def test_a_retention_round_gives_way_to_the_fan_out(database):
    """A round waiting for its locks behind an open fan-out stops no other fan-out: each step waits at most
    LOCK_WAIT_MS, then gives way (the previous job's DROP, in one transaction, queued every delivery's write
    and read behind it for as long as the open one lasted, up to its 5 s lock timeout)."""
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "webhook_deliveries")
    seen = while_a_writer_waits(url, lambda: _job(engine, end + timedelta(days=30)),
                                _fan_out("whd_open", end + timedelta(days=2)), _fan_out("whd_other", end + timedelta(days=3)))
    assert seen.writer_error is None, seen.writer_error
    assert seen.job_error is None and isinstance(seen.job, int) and seen.job >= 2, seen
    for table in TABLES:
        assert f"{table}_legacy" not in partition_names(engine, table)
    assert sorted(row_id for _, row_id in listed(engine, 100)) == ["whd_open", "whd_other"]


def test_an_endpoints_delete_takes_its_deliveries_and_their_attempts(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    end = legacy_bound(engine, "webhook_deliveries")
    fan_out(engine, "whd_month", "evt_month", end + timedelta(days=1))
    with engine.begin() as conn:
        conn.execute(_OLD_ATTEMPT, {"delivery": "whd_month", "attempt": 1, "at": end + timedelta(days=1)})
    with engine.begin() as conn:
        assert WebhookRepository(conn).delete(WORKSPACE, ENDPOINT)
    with engine.connect() as conn:
        left = [conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() for table in TABLES]
    assert left == [0, 0]


def test_the_downgrade_gives_every_row_back(database):
    url, engine = database
    migrate.upgrade(url, MODULES.migrations)
    fan_out(engine, "whd_month", "evt_month", legacy_bound(engine, "webhook_deliveries") + timedelta(days=1))
    before, tried = listed(engine, 3), attempts(engine)
    with engine.begin() as conn:  # an attempt whose delivery's month was dropped before its own
        conn.execute(_OLD_ATTEMPT, {"delivery": "whd_dropped", "attempt": 1, "at": NOW})
    command.downgrade(migrate.alembic_config(url, MODULES.migrations), BEFORE)
    assert listed(engine, 3) == before and attempts(engine) == tried
    assert [partition_names(engine, table) for table in TABLES] == [[], []]
    old_delivery(engine, "whd_downgraded", "evt_downgraded", NOW)  # the previous release's fan-out works again
    with engine.begin() as conn:
        assert WebhookRepository(conn).delete(WORKSPACE, ENDPOINT)  # the key cascades again
        assert conn.execute(text("SELECT count(*) FROM webhook_attempts")).scalar_one() == 0
    migrate.upgrade(url, MODULES.migrations)  # and up again


def test_the_fan_out_skips_events_past_the_retention():
    """An event fanned out later than the retention (its delivery's month may be dropped already) gets none."""
    worker = DeliveryWorker(None, None, retention_days=30)  # type: ignore[arg-type]
    fresh, stale = (Subscription(f"evt_{n}", "persona.created", ENDPOINT, NOW - timedelta(days=days))
                    for n, days in ((1, 29), (2, 31)))
    assert worker._within_retention([fresh, stale], NOW) == [fresh]
    assert DeliveryWorker(None, None)._within_retention([fresh, stale], NOW) == [fresh, stale]  # type: ignore[arg-type]
