"""Chat messages age out (issue 49): `chat_messages` becomes a table range-partitioned by month on
`session_started_at`, its session's `started_at` copied onto each message, so retention (the chat
module's job `chat.partitions`, PERSONA_CHAT_RETENTION_DAYS, 0 by default: kept forever, as the
specification states no retention for chat) drops a month of sessions whole, messages by the partition
and their sessions in the same transaction.

Why the session's month and not the message's own `created_at`:

- A transcript is never cut. A session's messages, every alternative and edit included, live in the
  partition of the month it started in, so a drop takes whole conversations, never the first half of
  one. By `created_at`, a long session would lose its opening turns and keep the rest.
- Uniqueness is the same as before. A partitioned table's unique keys must hold the partition key:
  `uq_chat_messages_session_ordinal_swipe` becomes (session_id, ordinal, swipe, session_started_at)
  and the key (id, session_started_at). `session_started_at` is a function of `session_id` (a
  session's `started_at` never changes), enforced by the database: the foreign key to the session is
  now (session_id, session_started_at) -> chat_sessions (id, started_at) (a unique index on those two,
  `uq_chat_sessions_id_started`, built concurrently), so the four columns are exactly as unique as the
  three were. Keeping uniqueness by the session's row lock alone (every write holds it and claims its
  ordinal from the session's counter) would do for this release's writers but leave the schema unable
  to refuse a duplicate.
- Reads stay in one partition. Every read and write of a conversation is by session; the repository
  names the session's `started_at` (a scalar subquery on the session's key), so PostgreSQL prunes to
  the one partition at execution. By `created_at`, each page of a session would probe every month.
  The session's cascade (an erasure, the retention's own delete) names it through the foreign key, so
  it prunes too.

Online, writers going on (docs/online-migrations.md, `phase = "swap"`):

1. The column added with a constant default, `'-infinity'` (no rewrite: PostgreSQL 11+), and a
   BEFORE INSERT trigger that puts the session's `started_at` in place of it
   (`chat_messages_session_start`, only when the row carries the default): the previous release's
   inserts name no `session_started_at`.
2. Outside a transaction: `uq_chat_sessions_id_started` built CONCURRENTLY; the existing rows given
   their session's `started_at` in batches of 1,000 sessions (one short UPDATE each, by the
   (session_id, ordinal, swipe) index; the previous release's own edits wait at most one batch).
3. The foreign key replaced: the new one added NOT VALID with the old one dropped (one short
   transaction), then VALIDATEd (a scan that blocks no writer).

Each of the three short transactions (1, 3 and the swap's) first takes its locks in the order an
exchange of the previous release takes them (its session's row updated, then its messages inserted:
`chat_sessions`, then `chat_messages`), each wait at most 200 ms and tried again a moment later
(partition_swap.lock_in_order): waiting longer, a migration holding one table and waiting on a writer
that holds the other would make PostgreSQL fail one of the two after `deadlock_timeout`, and it was the
writer (measured: one failed insert in 217 before this).
4. The shared swap (kernel/data/partition_swap.py), as for 0032-0034: the old table becomes the
   partition `chat_messages_legacy` (MINVALUE to `bound`, the first day of the month after both the
   newest session start and two days from now), two months made after it. The trigger of 1 ends on
   `chat_messages_legacy` alone: a row carrying the default is routed there (MINVALUE covers
   '-infinity'), and the session's `started_at` it then gets belongs there too, for any session
   started before `bound`. So the previous release must be gone before `bound` (two days at least):
   after it, its message to a session started since would fail on the partition's range (loud, nothing
   stored). This release writes the column itself (the same subquery), so no trigger runs for it.

Usage over time (GET /v1/usage) sums the replies in `chat_messages` by `created_at`; a dropped month
takes its sessions' replies out of it too (a session that started before the cut and was still in use
is gone whole, usage included): docs/configuration.md says so with the setting.

The downgrade is offline, as the other revisions': every row copied back into a plain table, the
single-column foreign key back, the column and the sessions' index dropped.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-02 15:00:00
"""

from __future__ import annotations

from alembic import op
from persona_service.kernel.api import MonthlySwap, SwapKey, UniqueIndex, lock_in_order
from sqlalchemy import text

revision = '0035'
down_revision = '0034'
branch_labels = None
depends_on = None
phase = "swap"

MESSAGES = MonthlySwap(
    'chat_messages', 'session_started_at', (SwapKey('chat_messages_pkey', ('id',)),),
    (UniqueIndex('uq_chat_messages_session_ordinal_swipe', ('session_id', 'ordinal', 'swipe')),),
    locked_before=('chat_sessions',),  # an exchange updates its session, then inserts its messages
)
OLD_REFERENCE, REFERENCE = "chat_messages_session_id_fkey", "chat_messages_session_fkey"
FILL = "chat_messages_session_start"
BATCH = 1000  # sessions per backfill statement


def _fill_trigger(table: str) -> str:
    return (f"CREATE TRIGGER {FILL} BEFORE INSERT ON {table} FOR EACH ROW "
            f"WHEN (NEW.session_started_at = '-infinity') EXECUTE FUNCTION {FILL}()")


def upgrade() -> None:
    lock_in_order(("chat_messages", "ACCESS EXCLUSIVE"))
    op.execute("ALTER TABLE chat_messages ADD COLUMN IF NOT EXISTS session_started_at timestamptz NOT NULL "
               "DEFAULT '-infinity'")
    op.execute(f"""CREATE OR REPLACE FUNCTION {FILL}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.session_started_at := coalesce(
                (SELECT started_at FROM chat_sessions WHERE id = NEW.session_id), NEW.session_started_at);
            RETURN NEW;
        END $$""")
    op.execute(f"DROP TRIGGER IF EXISTS {FILL} ON chat_messages")  # (a failed run's)
    op.execute(_fill_trigger("chat_messages"))
    with op.get_context().autocommit_block():  # (commits the column and trigger first)
        op.execute("CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS uq_chat_sessions_id_started "
                   "ON chat_sessions (id, started_at)")
        _backfill()
    lock_in_order(("chat_sessions", "SHARE ROW EXCLUSIVE"), ("chat_messages", "ACCESS EXCLUSIVE"))  # (writers' order)
    op.execute(f"ALTER TABLE chat_messages DROP CONSTRAINT IF EXISTS {OLD_REFERENCE}")
    op.execute(f"ALTER TABLE chat_messages DROP CONSTRAINT IF EXISTS {REFERENCE}")  # (a failed run's)
    op.execute(f"ALTER TABLE chat_messages ADD CONSTRAINT {REFERENCE} FOREIGN KEY (session_id, session_started_at) "
               "REFERENCES chat_sessions (id, started_at) ON DELETE CASCADE NOT VALID")
    with op.get_context().autocommit_block():
        op.execute(f"ALTER TABLE chat_messages VALIDATE CONSTRAINT {REFERENCE}")
    MESSAGES.upgrade()
    op.execute(f"DROP TRIGGER {FILL} ON chat_messages")  # (the swap put it on the parent, so on every month)
    op.execute(_fill_trigger(MESSAGES.legacy))


def _backfill() -> None:
    """Each existing message given its session's `started_at`, 1,000 sessions a statement (autocommit)."""
    bind, after = op.get_bind(), ""
    while True:
        sessions = bind.execute(text("SELECT id FROM chat_sessions WHERE id > :after ORDER BY id LIMIT :n"),
                                {"after": after, "n": BATCH}).scalars().all()
        if not sessions:
            return
        bind.execute(text("UPDATE chat_messages m SET session_started_at = s.started_at FROM chat_sessions s "
                          "WHERE m.session_id = ANY(:ids) AND s.id = m.session_id "
                          "AND m.session_started_at = '-infinity'"), {"ids": list(sessions)})
        after = sessions[-1]


def downgrade() -> None:
    MESSAGES.downgrade()
    op.execute(f"ALTER TABLE chat_messages DROP CONSTRAINT {REFERENCE}")
    op.execute(f"ALTER TABLE chat_messages ADD CONSTRAINT {OLD_REFERENCE} FOREIGN KEY (session_id) "
               "REFERENCES chat_sessions (id) ON DELETE CASCADE")
    op.execute("ALTER TABLE chat_messages DROP COLUMN session_started_at")
    op.execute("DROP INDEX uq_chat_sessions_id_started")
    op.execute(f"DROP FUNCTION {FILL}()")
