"""An event no webhook endpoint wants is fanned out (to nobody) as it is written: the webhook worker never
sees it. Before, every event woke the worker (the `persona_outbox` notification) for a fan-out transaction
and its four delivery lanes' claim and next-due queries, ~8 ms of CPU per persona creation across the
worker and PostgreSQL for an organization without any endpoint.

`events_subscribed` (BEFORE INSERT, per row) sets `dispatched_at` when no endpoint of the event's workspace
would receive it (an enabled one subscribed to its type or `*`; for a test ping, the endpoint it names),
exactly the worker's fan-out join (webhooks.repository.DeliveryQueue.subscribers), and the outbox
notification fires only for rows left undispatched.

The race with an endpoint being created (or enabled, or subscribed to more types) as an event is written is
closed by a transaction-scoped advisory lock per workspace: the event's check takes it shared (events never
wait for each other), the endpoint's change takes it exclusive (`webhook_endpoints_subscribers`). An endpoint
whose change committed before the event's check holds the lock until its commit, so the check waits for it
and then reads with a fresh snapshot (READ COMMITTED: every statement of a volatile function takes one): it
sees the endpoint, and the event is left for the worker. An event whose check came first holds the lock
shared until it commits, so the endpoint's change waits for it: the event committed before the endpoint
existed, and nothing was owed to it. A transaction at REPEATABLE READ or above reads one snapshot
throughout, which the lock cannot refresh: its events are always left for the worker, as before.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-09 22:10:00
"""

from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None

# The lock's key, the same on both sides (hashtextextended: PostgreSQL's own 64-bit text hash).
_KEY = "hashtextextended('webhook-subscribers:' || NEW.workspace_id, 0)"


def upgrade() -> None:
    op.execute(f"""
        CREATE FUNCTION persona_event_subscribed() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            IF NEW.dispatched_at IS NOT NULL OR current_setting('transaction_isolation') <> 'read committed' THEN
                RETURN NEW;
            END IF;
            PERFORM pg_advisory_xact_lock_shared({_KEY});
            IF NOT EXISTS (
                SELECT 1 FROM webhook_endpoints w
                WHERE w.workspace_id = NEW.workspace_id AND w.org_id = NEW.org_id
                  AND CASE WHEN NEW.type = 'webhook.endpoint.test_ping' THEN w.id = NEW.data ->> 'endpointId'
                           ELSE w.enabled AND w.events && ARRAY[NEW.type::text, '*'] END
            ) THEN
                NEW.dispatched_at := now();
            END IF;
            RETURN NEW;
        END $$
    """)
    op.execute("CREATE TRIGGER events_subscribed BEFORE INSERT ON events "
               "FOR EACH ROW EXECUTE FUNCTION persona_event_subscribed()")
    op.execute(f"""
        CREATE FUNCTION persona_webhook_subscribers_change() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock({_KEY});
            RETURN NEW;
        END $$
    """)
    op.execute("CREATE TRIGGER webhook_endpoints_subscribers BEFORE INSERT ON webhook_endpoints "
               "FOR EACH ROW EXECUTE FUNCTION persona_webhook_subscribers_change()")
    op.execute("CREATE TRIGGER webhook_endpoints_resubscribed BEFORE UPDATE OF enabled, events ON webhook_endpoints "
               "FOR EACH ROW WHEN (NEW.enabled AND (NOT OLD.enabled OR NEW.events IS DISTINCT FROM OLD.events)) "
               "EXECUTE FUNCTION persona_webhook_subscribers_change()")
    # Migration 0014's statement-level notification, now only for rows the worker has to fan out (replaced in
    # place: at no moment is there no trigger, and the previous release's worker is woken as before).
    op.execute("CREATE OR REPLACE TRIGGER events_notify_outbox AFTER INSERT ON events "
               "FOR EACH ROW WHEN (NEW.dispatched_at IS NULL) EXECUTE FUNCTION persona_notify('persona_outbox')")


def downgrade() -> None:
    op.execute("DROP TRIGGER events_notify_outbox ON events")
    op.execute("CREATE TRIGGER events_notify_outbox AFTER INSERT ON events "
               "FOR EACH STATEMENT EXECUTE FUNCTION persona_notify('persona_outbox')")
    op.execute("DROP TRIGGER webhook_endpoints_resubscribed ON webhook_endpoints")
    op.execute("DROP TRIGGER webhook_endpoints_subscribers ON webhook_endpoints")
    op.execute("DROP FUNCTION persona_webhook_subscribers_change()")
    op.execute("DROP TRIGGER events_subscribed ON events")
    op.execute("DROP FUNCTION persona_event_subscribed()")
