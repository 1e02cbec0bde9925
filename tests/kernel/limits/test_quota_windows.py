"""Since when monthly quotas count (kernel.data.quota_repository), on the real database: a
window that replaces one before it reset counts on from it; a reset starts afresh; draws from
before what any window counts are purged."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from persona_service.kernel.data.quota_repository import QuotaRepository
from sqlalchemy import text

NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_window_counts_on_from_the_one_it_replaced_until_a_reset(engine):
    org = f"org_{uuid.uuid4().hex[:12]}"
    opened = NOV + timedelta(days=14)
    renewal = opened + timedelta(days=30)
    with engine.begin() as conn:
        quotas = QuotaRepository(conn)
        assert quotas.counts_since(org, NOV, DEC, NOV + timedelta(days=3)) == NOV  # the calendar month
        # A subscription opens mid-month: its first period counts from the month's start.
        assert quotas.counts_since(org, opened, renewal, opened) == NOV
        assert quotas.counts_since(org, opened, renewal, opened + timedelta(days=1)) == NOV  # (recorded once)
        # The period renews: a reset, counted afresh.
        after = renewal + timedelta(days=30)
        assert quotas.counts_since(org, renewal, after, renewal + timedelta(seconds=1)) == renewal


def test_draws_no_window_counts_are_purged(engine):
    org = f"org_{uuid.uuid4().hex[:12]}"
    now = datetime.now(UTC)
    with engine.begin() as conn:
        quotas = QuotaRepository(conn)
        quotas.draw(org, "generations")
        conn.execute(text("UPDATE quota_draws SET drawn_at = :t WHERE org_id = :o"),
                     {"t": now - timedelta(days=40), "o": org})
        quotas.draw(org, "generations")
        quotas.counts_since(org, now - timedelta(days=1), now + timedelta(days=29), now)
        assert quotas.drawn_since(org, "generations", now - timedelta(days=1)) == 1
        assert quotas.purge_counted_out() >= 1
        assert conn.execute(text("SELECT count(*) FROM quota_draws WHERE org_id = :o"), {"o": org}).scalar_one() == 1
