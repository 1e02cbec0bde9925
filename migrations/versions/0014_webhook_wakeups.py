"""Webhook worker wake-ups: PostgreSQL notifications when events are written
and when deliveries are added or change (fan-out, replays, pings, a retry
scheduled by another worker), so an idle worker waits for work instead of
polling for it.

Statement-level triggers: one notification per writing statement (PostgreSQL
folds duplicates within a transaction and delivers them on commit), no extra
round trip for the writer.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 11:00:00
"""

from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

_TRIGGERS = {
    # table: (trigger, events, channel)
    'events': ('events_notify_outbox', 'INSERT', 'persona_outbox'),
    'webhook_deliveries': ('webhook_deliveries_notify', 'INSERT OR UPDATE', 'persona_webhook_deliveries'),
}


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION persona_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify(TG_ARGV[0], '');
            RETURN NULL;
        END $$
    """)
    for table, (trigger, events, channel) in _TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {trigger} AFTER {events} ON {table} "
                   f"FOR EACH STATEMENT EXECUTE FUNCTION persona_notify('{channel}')")


def downgrade() -> None:
    for table, (trigger, _, _) in _TRIGGERS.items():
        op.execute(f"DROP TRIGGER {trigger} ON {table}")
    op.execute("DROP FUNCTION persona_notify()")
