"""Idempotency keys are scoped per organization (issue 38), as Stripe scopes
them per account: the same key and request from two credentials of one
organization is one execution. A unique index on (org_id, key) is what the
claim's upsert now names; `credential_id` stays, as who first used the key.

An expand step: records from before (per credential) that share a key keep
the oldest (the rest are replays of at most 24 hours), then the index is
built CONCURRENTLY, outside the migration's transaction (writers never wait
for the build). The previous release keeps claiming on its primary key
(org_id, credential_id, key); only its claim of a key another credential of
the organization holds is refused, which is the new rule. A build that fails
(a duplicate written meanwhile) leaves an INVALID index; the upgrade, run
again, deletes the duplicate and builds it anew.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 03:00:00
"""

from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None

INDEX = 'uq_idempotency_keys_org_key'


def upgrade() -> None:
    op.execute("""
        DELETE FROM idempotency_keys k USING idempotency_keys older
        WHERE k.org_id = older.org_id AND k.key = older.key
          AND (older.created_at, older.credential_id) < (k.created_at, k.credential_id)
    """)
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")  # an INVALID one a failed build left
        op.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {INDEX} ON idempotency_keys (org_id, key)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
