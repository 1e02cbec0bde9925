"""The event log ages out (issue 49): `events` (the outbox behind GET /v1/events and the webhook
fan-out) becomes a table range-partitioned by month on `occurred_at`, so retention drops whole
partitions (the kernel's job `events.partitions`, PERSONA_EVENT_RETENTION_DAYS) instead of deleting
rows one by one.

The same online swap as 0032's (kernel/data/partition_swap.py, docs/online-migrations.md), hence
`phase = "swap"`. The keys gain the partition key: the primary key is (seq, occurred_at) and the
unique key (id, occurred_at). No foreign key references `events` (a delivery names its event by id,
a plain column), so none has to change; ids are unique by construction (new_id), the key keeps an
index on id first for the lookups by id. `seq` stays an identity: the partitioned table's sequence
starts where the old one was, so the webhook fan-out's order (by seq) goes on across the swap. The
statement trigger that wakes the webhook workers (0014) moves to the partitioned table.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

from persona_service.kernel.data.partition_swap import Key, MonthlySwap

revision = '0033'
down_revision = '0032'
branch_labels = None
depends_on = None
phase = "swap"

SWAP = MonthlySwap('events', 'occurred_at', (Key('events_pkey', ('seq',)), Key('events_id_key', ('id',), 'UNIQUE')))


def upgrade() -> None:
    SWAP.upgrade()


def downgrade() -> None:
    SWAP.downgrade()
