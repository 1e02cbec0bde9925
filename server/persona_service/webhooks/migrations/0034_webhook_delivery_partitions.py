"""Webhook deliveries age out (issue 49): `webhook_deliveries` becomes a table range-partitioned by
month on `created_at` and `webhook_attempts` one partitioned by month on `attempted_at`, so retention
drops whole partitions (the webhooks module's job `webhooks.partitions`,
PERSONA_WEBHOOK_DELIVERY_RETENTION_DAYS) instead of deleting rows one by one.

The same online swap as 0032's and 0033's (kernel/data/partition_swap.py, docs/online-migrations.md),
hence `phase = "swap"`, once per table. What differs:

- The keys gain the partition key: `webhook_deliveries (id, created_at)`, `webhook_attempts
  (delivery_id, attempt, attempted_at)`. A delivery is one per (endpoint, event) by the unique index
  `uq_webhook_deliveries_endpoint_event`, which now holds `created_at` too: the fan-out writes the
  event's `occurred_at` as the delivery's `created_at` (WebhookRepository's DeliveryQueue), so the
  three columns are as unique as the two were. The fan-out names the new index as its conflict target;
  the previous release's fan-out names the old one (endpoint_id, event_id), which no longer exists:
  its webhook workers' fan-out fails (their events stay undispatched, nothing is lost) until they
  are replaced, so deploy the release that fans out this way before this revision's (docs/
  online-migrations.md). Its claims, attempts, replays and lists go on as before.
- The deliveries' foreign key to their endpoint moves to the partitioned table (the old table's
  attaches to it, no validation).
- The attempts' foreign key to their delivery is gone: a key referencing a partitioned table must hold
  its partition key (a `delivery_created_at` the previous release does not write, and a partition
  key cannot be filled by a trigger: rows are routed before it runs), and a referenced partition
  cannot be dropped. What it did, deleting a delivery's attempts with it (an endpoint's DELETE, an
  organization's erasure), a row trigger on `webhook_deliveries` does (`webhook_deliveries_cascade`,
  created on the table as it is, so the swap moves it with the others). A dropped month of
  deliveries fires nothing: its attempts go with their own months, the same retention later (an
  attempt is made within hours of its delivery, so at most a month later), unread meanwhile (attempts
  are read by their delivery's id only).

The downgrade is offline, as the other revisions': every row copied back into plain tables, the
attempts' foreign key back in place of the trigger.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-02 12:00:00
"""

from __future__ import annotations

from alembic import op
from persona_service.kernel.api import MonthlySwap, SwapKey, UniqueIndex

revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None
phase = "swap"

DELIVERIES = MonthlySwap(
    'webhook_deliveries', 'created_at', (SwapKey('webhook_deliveries_pkey', ('id',)),),
    (UniqueIndex('uq_webhook_deliveries_endpoint_event', ('endpoint_id', 'event_id'), 'replay_of IS NULL'),),
)
ATTEMPTS = MonthlySwap('webhook_attempts', 'attempted_at', (SwapKey('webhook_attempts_pkey', ('delivery_id', 'attempt')),))
REFERENCE = "webhook_attempts_delivery_id_fkey"


def upgrade() -> None:
    op.execute("""CREATE FUNCTION webhook_deliveries_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM webhook_attempts WHERE delivery_id = OLD.id;
            RETURN NULL;
        END $$""")
    op.execute("CREATE TRIGGER webhook_deliveries_cascade AFTER DELETE ON webhook_deliveries "
               "FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_cascade()")
    op.execute(f"ALTER TABLE webhook_attempts DROP CONSTRAINT {REFERENCE}")  # (committed with the trigger)
    DELIVERIES.upgrade()
    ATTEMPTS.upgrade()


def downgrade() -> None:
    ATTEMPTS.downgrade()
    DELIVERIES.downgrade()
    op.execute("DROP TRIGGER webhook_deliveries_cascade ON webhook_deliveries")
    op.execute("DROP FUNCTION webhook_deliveries_cascade()")
    # (the attempts of deliveries whose month was dropped before theirs: the key would refuse them)
    op.execute("DELETE FROM webhook_attempts a WHERE NOT EXISTS "
               "(SELECT FROM webhook_deliveries d WHERE d.id = a.delivery_id)")
    op.execute(f"ALTER TABLE webhook_attempts ADD CONSTRAINT {REFERENCE} FOREIGN KEY (delivery_id) "
               "REFERENCES webhook_deliveries (id) ON DELETE CASCADE")
