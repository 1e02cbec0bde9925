"""The audit log ages out (issue 49): `audit_events` becomes a table range-partitioned by
month on `occurred_at`, so retention drops whole partitions (the kernel's job
`audit.partitions`, PERSONA_AUDIT_RETENTION_DAYS) instead of deleting rows one by one.

Online (docs/online-migrations.md): the new table takes the old one's name, columns, defaults and
index names, so the previous release goes on inserting (its `occurred_at` from the server default,
which the old table, now a partition, covers) and listing. Statement by statement this is a swap
(renames, a re-key), hence `phase = "swap"`; `make check-online-migration` is its real check.

1. Outside a transaction, writers going on: a unique index on (id, occurred_at) built CONCURRENTLY
   (the old table's key as a partition: a partitioned table's key holds the partition key); a
   CHECK (occurred_at < bound) added NOT VALID, then VALIDATEd (a scan under SHARE UPDATE
   EXCLUSIVE, which blocks no writer), so the ATTACH below need not scan. `bound` is the first day
   of the month after both the newest row and two days from now (a row the previous release
   writes at midnight on a month's last day still fits the CHECK).
2. One transaction, catalog changes only (milliseconds under ACCESS EXCLUSIVE; `lock_timeout`
   makes a migration stuck behind a long reader fail, to be run again, rather than queue every
   writer behind it): the old table and its indexes renamed aside (`audit_events_legacy`) and
   re-keyed on the index from 1; the partitioned `audit_events` with the model's key and indexes
   (empty: built at once); the old table ATTACHed FOR VALUES FROM (MINVALUE) TO (bound), its
   indexes attaching to the parent's as they match (no build); the months after `bound` made.

No DEFAULT partition: the job makes partitions two months ahead every hour, so inserts land in a
month that exists unless it failed for a month (and then `persona_job_runs_total{job="audit.partitions",
outcome="failed"}` has counted it all along). A DEFAULT partition would turn that loud failure
into a silent one that breaks the job for good: rows of a month in DEFAULT make that month's
partition impossible to create (PostgreSQL refuses a range the default holds rows of) until they
are moved by hand, and every new partition scans DEFAULT under an exclusive lock.

The downgrade is offline, as the other revisions' are: every row copied into a plain table that
takes the name, key and indexes of 0031's.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-02 04:00:00
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None
phase = "swap"

LEGACY = 'audit_events_legacy'
LEGACY_KEY = 'audit_events_legacy_pkey'
BOUND_CHECK = 'audit_events_legacy_bound'
MONTHS_AHEAD = 2  # months made after `bound` (the job keeps two ahead from then on)
# The model's indexes: name -> (columns, partial-index predicate).
INDEXES = {
    'ix_audit_events_org_time': (['org_id', 'occurred_at', 'id'], None),
    'ix_audit_events_org_action_time': (['org_id', 'action', 'occurred_at', 'id'], None),
    'ix_audit_events_org_actor_time': (['org_id', 'actor_user_id', 'occurred_at', 'id'], None),
    'ix_audit_events_org_credential_time': (['org_id', 'credential_id', 'occurred_at', 'id'], None),
    'ix_audit_events_org_resource_time': (['org_id', 'resource_type', 'resource_id', 'occurred_at', 'id'], None),
    'ix_audit_events_org_failures': (['org_id', 'occurred_at', 'id'], "outcome = 'failure'"),
}


def _legacy_index(name: str) -> str:
    return name.replace('ix_audit_events', LEGACY)


def _stamp(moment: datetime) -> str:
    return f"'{moment.isoformat()}'"


def _month_after(moment: datetime) -> datetime:
    return datetime(moment.year + moment.month // 12, moment.month % 12 + 1, 1, tzinfo=UTC)


def _bound() -> datetime:
    """The first day of the month after both the newest row and two days from now (UTC)."""
    newest = op.get_bind().execute(sa.text(
        "SELECT greatest(now() + interval '2 days', max(occurred_at)) AT TIME ZONE 'UTC' FROM audit_events",
    )).scalar_one()
    return _month_after(newest.replace(tzinfo=UTC))


def _prepare(bound: datetime) -> None:
    """Step 1, outside a transaction: what would otherwise scan under the swap's lock."""
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {LEGACY_KEY}")  # an INVALID one a failed build left
        op.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {LEGACY_KEY} ON audit_events (id, occurred_at)")
        op.execute(f"ALTER TABLE audit_events DROP CONSTRAINT IF EXISTS {BOUND_CHECK}")  # a failed run's
        op.execute(f"ALTER TABLE audit_events ADD CONSTRAINT {BOUND_CHECK} "
                   f"CHECK (occurred_at < {_stamp(bound)}) NOT VALID")
        op.execute(f"ALTER TABLE audit_events VALIDATE CONSTRAINT {BOUND_CHECK}")


def _set_aside() -> None:
    """The old table and its indexes under other names, keyed as a partition must be."""
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute(f"ALTER TABLE audit_events RENAME TO {LEGACY}")
    op.execute(f"ALTER TABLE {LEGACY} DROP CONSTRAINT audit_events_pkey")
    op.execute(f"ALTER TABLE {LEGACY} ADD CONSTRAINT {LEGACY_KEY} PRIMARY KEY USING INDEX {LEGACY_KEY}")
    for name in INDEXES:
        op.execute(f"ALTER INDEX {name} RENAME TO {_legacy_index(name)}")
    # PostgreSQL 18 names NOT NULL constraints (`audit_events_id_not_null`): the old ones step aside
    # too, so the new table's get the names a new table has (none before 18: nothing to do).
    op.execute(f"""DO $$ DECLARE old record; BEGIN
        FOR old IN SELECT conname FROM pg_constraint WHERE conrelid = '{LEGACY}'::regclass AND contype = 'n' LOOP
            EXECUTE format('ALTER TABLE {LEGACY} RENAME CONSTRAINT %I TO %I',
                           old.conname, replace(old.conname, 'audit_events_', '{LEGACY}_'));
        END LOOP;
    END $$""")


def _create_parent() -> None:
    op.create_table(
        'audit_events',
        sa.Column('id', sa.String(length=40), nullable=False),
        sa.Column('occurred_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.Column('org_id', sa.String(length=40), nullable=True),
        sa.Column('workspace_id', sa.String(length=40), nullable=True),
        sa.Column('actor_user_id', sa.String(length=64), nullable=True),
        sa.Column('credential_id', sa.String(length=64), nullable=True),
        sa.Column('action', sa.String(length=100), nullable=False),
        sa.Column('resource_type', sa.String(length=64), nullable=False),
        sa.Column('resource_id', sa.String(length=200), nullable=False),
        sa.Column('outcome', sa.String(length=10), nullable=False),
        sa.Column('status', sa.Integer(), nullable=False),
        sa.Column('error_code', sa.String(length=40), nullable=False),
        sa.Column('request_id', sa.String(length=200), nullable=False),
        sa.Column('client_ip', sa.String(length=64), nullable=False),
        sa.Column('details', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint('id', 'occurred_at', name='audit_events_pkey'),
        postgresql_partition_by='RANGE (occurred_at)',
    )
    _create_indexes()  # a table with no partition yet: built at once


def _attach(bound: datetime) -> None:
    op.execute(f"ALTER TABLE audit_events ATTACH PARTITION {LEGACY} FOR VALUES FROM (MINVALUE) TO ({_stamp(bound)})")
    op.execute(f"ALTER TABLE {LEGACY} DROP CONSTRAINT {BOUND_CHECK}")  # the partition's bound says as much
    start = bound
    for _ in range(MONTHS_AHEAD):
        end = _month_after(start)
        op.execute(f"CREATE TABLE audit_events_p{start:%Y%m} PARTITION OF audit_events "
                   f"FOR VALUES FROM ({_stamp(start)}) TO ({_stamp(end)})")
        start = end


def upgrade() -> None:
    bound = _bound()
    _prepare(bound)
    _set_aside()
    _create_parent()
    _attach(bound)


def _create_indexes() -> None:
    for name, (columns, where) in INDEXES.items():
        op.create_index(name, 'audit_events', columns, postgresql_where=sa.text(where) if where else None)


def downgrade() -> None:
    op.execute("CREATE TABLE audit_events_plain (LIKE audit_events INCLUDING DEFAULTS)")
    op.execute("INSERT INTO audit_events_plain SELECT * FROM audit_events")
    op.drop_table('audit_events')  # and its partitions
    op.execute("ALTER TABLE audit_events_plain RENAME TO audit_events")
    op.execute("ALTER TABLE audit_events ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id)")
    _create_indexes()
