"""The audit log ages out (issue 49): `audit_events` becomes a table range-partitioned by
month on `occurred_at`, so retention drops whole partitions (the kernel's job
`audit.partitions`, PERSONA_AUDIT_RETENTION_DAYS) instead of deleting rows one by one.

Online (docs/online-migrations.md): the new table takes the old one's name, columns, defaults and
index names, so the previous release goes on inserting (its `occurred_at` from the server default,
which the old table, now a partition, covers) and listing. Statement by statement this is a swap
(renames, a re-key), hence `phase = "swap"`; `make check-online-migration` is its real check.

The swap's steps are kernel/data/partition_swap.py's (written here first, made the shared helper
with 0033): the unique index on (id, occurred_at) built CONCURRENTLY and a CHECK validated while
writers go on, then one short transaction renaming the old table aside (`audit_events_legacy`),
re-keying it, creating the partitioned `audit_events` LIKE it, attaching the old table as the
partition of everything before the month after both its newest row and two days from now, and
making the two months after.

The downgrade is offline, as the other revisions' are: every row copied into a plain table that
takes the name, key and indexes of 0031's.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-02 04:00:00
"""

from __future__ import annotations

from persona_service.kernel.data.partition_swap import Key, MonthlySwap

revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None
phase = "swap"

SWAP = MonthlySwap('audit_events', 'occurred_at', (Key('audit_events_pkey', ('id',)),))


def upgrade() -> None:
    SWAP.upgrade()


def downgrade() -> None:
    SWAP.downgrade()
