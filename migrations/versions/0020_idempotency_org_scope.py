"""Idempotency keys are scoped per organization (issue 38), as Stripe scopes
them per account: the same key and request from two credentials of one
organization is one execution. The primary key drops `credential_id`, which
stays as who first used the key. Records from before (per credential) that
now share a key keep the oldest; the rest are deleted (they are replays of
at most 24 hours).

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 03:00:00
"""

from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        DELETE FROM idempotency_keys k USING idempotency_keys older
        WHERE k.org_id = older.org_id AND k.key = older.key
          AND (older.created_at, older.credential_id) < (k.created_at, k.credential_id)
    """)
    op.drop_constraint('idempotency_keys_pkey', 'idempotency_keys', type_='primary')
    op.create_primary_key('idempotency_keys_pkey', 'idempotency_keys', ['org_id', 'key'])


def downgrade() -> None:
    op.drop_constraint('idempotency_keys_pkey', 'idempotency_keys', type_='primary')
    op.create_primary_key('idempotency_keys_pkey', 'idempotency_keys', ['org_id', 'credential_id', 'key'])
