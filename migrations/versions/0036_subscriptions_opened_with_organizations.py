"""Every organization has its subscription: billing opens it in the unit of work that makes the organization
(the kernel's organization-opener port, `Module.open_organization`), no longer at GetSubscription's first read,
which wrote on a read. This backfills the organizations made before that and never read: each opens as that
first read would have opened it (on the organization's plan, its first period starting now), so the deploy
invoices nobody. Shared: it reads `organizations` (orgs') and writes `subscriptions` (billing's).

Expand: the previous release still opens a subscription at its first read (ON CONFLICT DO NOTHING, so never
twice), and an organization it makes during the rollout reads, on this release, as it will open, until a write
opens it (billing.service `BillingService.subscription`).

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-03 15:00:00
"""

from alembic import op

revision = '0036'
down_revision = '0035'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        INSERT INTO subscriptions (org_id, plan, status, current_period_start, current_period_end,
                                   cancel_at_period_end, credit_minor, invoice_seq, pending_lines,
                                   processor_customer_id)
        SELECT o.id, o.plan, 'active', now(), now() + interval '1 month', false, 0, 0, '[]'::jsonb, ''
        FROM organizations o
        ON CONFLICT (org_id) DO NOTHING
    """)


def downgrade() -> None:
    pass  # the rows are what the first reads would have written; the previous release reads them as its own
