"""The online migration that turns a plain table into one range-partitioned by month (issue 49), for
the revisions of the tables that age out (0032 `audit_events`, 0033 `events`, 0034 `webhook_deliveries`
and `webhook_attempts`; docs/online-migrations.md).

The new table takes the old one's name, columns, defaults, identity, index names and statement
triggers, so the previous release goes on writing and listing through it. Statement by statement it
is a swap (renames, a re-key): a revision using it says `phase = "swap"`, and `make
check-online-migration` is its real check.

1. Outside a transaction, writers going on: for each key (primary key, unique constraint) and unique
   index (a partial one too), a unique index on its columns and the partition key built CONCURRENTLY (a
   partitioned table's keys hold the partition key); a CHECK (column < bound) added NOT VALID, then VALIDATEd (a scan under SHARE UPDATE
   EXCLUSIVE, which blocks no writer), so the ATTACH below need not scan. `bound` is the first day of
   the month after both the newest row and two days from now (a row the previous release writes at
   midnight on a month's last day still fits the CHECK).
2. One transaction, catalog changes only (milliseconds under ACCESS EXCLUSIVE; `lock_timeout` makes a
   migration stuck behind a long reader fail, to be run again, rather than queue every writer behind
   it): the old table renamed aside (`<table>_legacy`), re-keyed on the indexes of 1 (its unique indexes
   without the partition key dropped), its other indexes and NOT NULL constraints renamed aside, its
   identity dropped (a partition may not have one: the parent's takes over where the old sequence was);
   the partitioned table made LIKE it with the keys and the old table's foreign keys, the unique indexes
   with the partition key, the old indexes' definitions (empty: built at once), identity and triggers;
   the old table ATTACHed FOR VALUES FROM (MINVALUE) TO (bound), its indexes and foreign keys attaching
   to the parent's as they match (no build, no validation); the months after `bound` made.

A foreign key referencing the table is the revision's to drop first: a partitioned table's referenced
key holds the partition key, and a partition referenced by one cannot be dropped (0034 says what
replaces it).

No DEFAULT partition: the table's job (kernel/transport/partitions.py) makes partitions two months
ahead every hour, so writes land in a month that exists unless it failed for two months (counted
all along by `persona_job_runs_total{outcome="failed"}`). A DEFAULT partition would turn that loud
failure into a silent one that breaks the job for good: rows of a month in DEFAULT make that month's
partition impossible to create until they are moved by hand, and every new partition scans DEFAULT
under an exclusive lock.

The downgrade is offline, as the other revisions' are: every row copied into a plain table that takes
the name, keys, indexes, identity and triggers back.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from alembic import op
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from persona_service.kernel.data.partitions_repository import MonthlyPartitions, month_after

MONTHS_AHEAD = 2  # months made after `bound` (the job keeps two ahead from then on)
# Each try at a swap's locks waits at most this long, well under PostgreSQL's deadlock_timeout (1 s by default):
# in a cycle with a writer, the migration is the one that gives way (and tries again), never the writer.
LOCK_WAIT_MS = 200
LOCK_TRIES = 300  # a minute or more of tries, then the migration fails, to be run again


@dataclass(frozen=True)
class Key:
    """A primary key or unique constraint of the table as it was (the downgrade gives it back as such)."""

    name: str
    columns: tuple[str, ...]
    kind: str = "PRIMARY KEY"  # or "UNIQUE"


@dataclass(frozen=True)
class UniqueIndex:
    """A unique index of the table as it was (`where`: a partial one's predicate); on the partitioned table
    it holds the partition key too, so it is unique per (columns, key), and the revision says what keeps
    the columns alone unique (0034: the key derived from them)."""

    name: str
    columns: tuple[str, ...]
    where: str = ""


@dataclass(frozen=True)
class Identity:
    column: str
    kind: str  # ALWAYS | BY DEFAULT
    start: int  # the first value the new sequence gives


@dataclass(frozen=True)
class _Catalog:
    """What the table has that the partitioned one must have too, read before the swap renames it."""

    indexes: dict[str, str]  # name -> definition (not those of its keys)
    triggers: dict[str, str]  # name -> definition, its own triggers
    foreign_keys: dict[str, str]  # name -> definition, those it holds (not those referencing it)


@dataclass(frozen=True)
class MonthlySwap:
    table: str
    column: str  # the partition key: a timestamptz NOT NULL column
    keys: tuple[Key, ...]
    unique_indexes: tuple[UniqueIndex, ...] = ()
    # Tables a writer changes before this one in a transaction, which the swap locks too (a foreign key it holds
    # references them): locked first, in the writers' order (0035: an exchange updates its session's counters,
    # then inserts its messages).
    locked_before: tuple[str, ...] = ()

    @property
    def legacy(self) -> str:
        return f"{self.table}_legacy"

    def upgrade(self) -> None:
        bound = self._bound()
        self._prepare(bound)
        catalog = _catalog(self.table, {name for key in self._unique for name in (key.name, self._legacy_key(key))})
        identities = self._set_aside(catalog)
        self._create_parent(catalog, identities)
        self._attach(bound)

    def downgrade(self) -> None:
        plain = f"{self.table}_plain"
        catalog = _catalog(self.table, {key.name for key in self._unique})
        identities = _identities(self.table, self.table)
        op.execute(f"CREATE TABLE {plain} (LIKE {self.table} INCLUDING DEFAULTS)")
        op.execute(f"INSERT INTO {plain} SELECT * FROM {self.table}")
        op.execute(f"DROP TABLE {self.table}")  # and its partitions
        op.execute(f"ALTER TABLE {plain} RENAME TO {self.table}")
        for key in self.keys:
            op.execute(f"ALTER TABLE {self.table} ADD CONSTRAINT {key.name} {key.kind} ({', '.join(key.columns)})")
        for index in self.unique_indexes:
            op.execute(_unique_index(index.name, self.table, index.columns, index.where))
        for name, definition in catalog.foreign_keys.items():
            op.execute(f"ALTER TABLE {self.table} ADD CONSTRAINT {name} {definition}")
        self._recreate(catalog, identities)

    # --- the upgrade's steps ---------------------------------------------------------------------------

    @property
    def _unique(self) -> tuple[Key | UniqueIndex, ...]:
        """What is unique and must hold the partition key: the keys, then the unique indexes."""
        return (*self.keys, *self.unique_indexes)

    def _legacy_key(self, key: Key | UniqueIndex) -> str:
        return key.name.replace(self.table, self.legacy, 1)

    def _with_key(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        return columns if self.column in columns else (*columns, self.column)

    def _partitioned_columns(self, key: Key) -> str:
        return ", ".join(self._with_key(key.columns))

    @property
    def _check(self) -> str:
        return f"{self.legacy}_bound"

    def _bound(self) -> datetime:
        """The first day of the month after both the newest row and two days from now (UTC)."""
        newest = op.get_bind().execute(text(
            f"SELECT greatest(now() + interval '2 days', max({self.column})) AT TIME ZONE 'UTC' FROM {self.table}",
        )).scalar_one()
        return month_after(newest.replace(tzinfo=UTC))

    def _prepare(self, bound: datetime) -> None:
        """Step 1, outside a transaction: what would otherwise scan under the swap's lock."""
        with op.get_context().autocommit_block():
            for key in self._unique:
                name = self._legacy_key(key)
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
                where = key.where if isinstance(key, UniqueIndex) else ""
                op.execute(_unique_index(name, self.table, self._with_key(key.columns), where, "CONCURRENTLY"))
            op.execute(f"ALTER TABLE {self.table} DROP CONSTRAINT IF EXISTS {self._check}")  # a failed run's
            op.execute(f"ALTER TABLE {self.table} ADD CONSTRAINT {self._check} "
                       f"CHECK ({self.column} < {_stamp(bound)}) NOT VALID")
            op.execute(f"ALTER TABLE {self.table} VALIDATE CONSTRAINT {self._check}")

    def _set_aside(self, catalog: _Catalog) -> list[Identity]:
        """The old table and its indexes under other names, keyed as a partition must be, without identity."""
        lock_in_order(*((table, "SHARE ROW EXCLUSIVE") for table in self.locked_before), (self.table, "ACCESS EXCLUSIVE"))
        op.execute("SET LOCAL lock_timeout = '10s'")
        op.execute(f"ALTER TABLE {self.table} RENAME TO {self.legacy}")
        for key in self.keys:
            op.execute(f"ALTER TABLE {self.legacy} DROP CONSTRAINT {key.name}")
            op.execute(f"ALTER TABLE {self.legacy} ADD CONSTRAINT {self._legacy_key(key)} {key.kind} "
                       f"USING INDEX {self._legacy_key(key)}")
        for index in self.unique_indexes:  # its twin with the partition key (1.) takes over, built already
            op.execute(f"DROP INDEX {index.name}")
        for name in catalog.indexes:
            op.execute(f"ALTER INDEX {name} RENAME TO {self._legacy_index(name)}")
        for name in catalog.triggers:  # the partitioned table's (recreated below) reach its partitions
            op.execute(f"DROP TRIGGER {name} ON {self.legacy}")
        # PostgreSQL 18 names NOT NULL constraints (`<table>_id_not_null`): the old ones step aside too, so
        # the new table's get the names a new table has (none before 18: nothing to do).
        _rename_not_null(self.legacy, self.table, self.legacy)
        identities = _identities(self.legacy, self.legacy)  # under the lock: no writer takes a value after this
        for identity in identities:
            op.execute(f"ALTER TABLE {self.legacy} ALTER COLUMN {identity.column} DROP IDENTITY")
        return identities

    def _legacy_index(self, name: str) -> str:
        """`ix_<table>_org_time` -> `<table>_legacy_org_time`; another name -> `<table>_legacy_<name>`."""
        prefix = f"ix_{self.table}"
        return self.legacy + (name.removeprefix(prefix) if name.startswith(prefix) else f"_{name}")

    def _create_parent(self, catalog: _Catalog, identities: list[Identity]) -> None:
        # The old table's foreign keys too, before it is attached: its own then match them and attach (no
        # validation scan); added to it later, they would be checked row by row under the lock.
        constraints = ", ".join([
            *(f"CONSTRAINT {key.name} {key.kind} ({self._partitioned_columns(key)})" for key in self.keys),
            *(f"CONSTRAINT {name} {definition}" for name, definition in catalog.foreign_keys.items())])
        op.execute(f"CREATE TABLE {self.table} (LIKE {self.legacy} INCLUDING DEFAULTS, {constraints}) "
                   f"PARTITION BY RANGE ({self.column})")
        # LIKE copies the NOT NULL constraints' names too (PostgreSQL 18): the parent's take the names a table
        # made by its model has, or the migrations and the tables drift (tests/kernel/test_module_migrations.py).
        _rename_not_null(self.table, self.legacy, self.table)
        for index in self.unique_indexes:  # a table with no partition yet: built at once, as the others below
            op.execute(_unique_index(index.name, self.table, self._with_key(index.columns), index.where))
        self._recreate(catalog, identities)

    def _recreate(self, catalog: _Catalog, identities: list[Identity]) -> None:
        """The indexes, identity and triggers of the table as it was, on the table now of its name."""
        for definition in catalog.indexes.values():
            op.execute(definition.replace(" ON ONLY ", " ON ", 1))  # (a partitioned table's own, downgrading)
        for identity in identities:
            op.execute(f"ALTER TABLE {self.table} ALTER COLUMN {identity.column} "
                       f"ADD GENERATED {identity.kind} AS IDENTITY (START WITH {identity.start})")
        for definition in catalog.triggers.values():
            op.execute(definition)

    def _attach(self, bound: datetime) -> None:
        op.execute(f"ALTER TABLE {self.table} ATTACH PARTITION {self.legacy} "
                   f"FOR VALUES FROM (MINVALUE) TO ({_stamp(bound)})")
        op.execute(f"ALTER TABLE {self.legacy} DROP CONSTRAINT {self._check}")  # the partition's bound says as much
        partitions, start = MonthlyPartitions(op.get_bind(), self.table), bound
        for _ in range(MONTHS_AHEAD):
            partitions.make(start, month_after(start))
            start = month_after(start)


def lock_in_order(*locks: tuple[str, str]) -> None:
    """(table, mode) locks taken for the rest of the transaction, in the order given (a writer's), each wait at
    most LOCK_WAIT_MS: one that would wait longer gives back those it took (a savepoint) and tries again a
    moment later. So a migration waiting on a long reader neither queues every writer behind it for long nor
    waits in a cycle long enough for PostgreSQL to break it by failing a writer."""
    bind = op.get_bind()
    for _ in range(LOCK_TRIES):
        savepoint = bind.begin_nested()
        try:
            bind.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT_MS}ms'"))
            for table, mode in locks:
                bind.execute(text(f"LOCK TABLE {table} IN {mode} MODE"))
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", "") not in ("55P03", "40P01"):  # lock_not_available, deadlock_detected
                raise
            savepoint.rollback()
            time.sleep(random.uniform(0.05, 0.25))
            continue
        savepoint.commit()
        return
    raise TimeoutError(f"no turn at the locks {locks} in {LOCK_TRIES} tries: run the migration again")


def _rename_not_null(table: str, old_prefix: str, new_prefix: str) -> None:
    """`table`'s NOT NULL constraints named `<old_prefix>_…` renamed `<new_prefix>_…` (PostgreSQL 18 names
    them; before 18 there are none to rename)."""
    op.execute(f"""DO $$ DECLARE old record; BEGIN
        FOR old IN SELECT conname FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'n'
                   AND conname LIKE '{old_prefix}\\_%' LOOP
            EXECUTE format('ALTER TABLE {table} RENAME CONSTRAINT %I TO %I',
                           old.conname, '{new_prefix}' || substr(old.conname, {len(old_prefix) + 1}));
        END LOOP;
    END $$""")


def _unique_index(name: str, table: str, columns: tuple[str, ...], where: str, how: str = "") -> str:
    return (f"CREATE UNIQUE INDEX {how} {name} ON {table} ({', '.join(columns)})"
            + (f" WHERE {where}" if where else ""))


def _stamp(moment: datetime) -> str:
    return f"'{moment.isoformat()}'"


def _catalog(table: str, keys: set[str]) -> _Catalog:
    """The table's indexes but those named in `keys` (definitions naming the table), its triggers and the
    foreign keys it holds (its own, not a partition's copy of its parent's)."""
    bind = op.get_bind()
    indexes = bind.execute(text(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = CAST(:table AS regclass) ORDER BY c.relname"), {"table": table}).all()
    triggers = bind.execute(text(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = CAST(:table AS regclass) "
        "AND NOT tgisinternal AND tgparentid = 0 ORDER BY tgname"), {"table": table}).all()
    foreign_keys = bind.execute(text(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = CAST(:table AS regclass) "
        "AND contype = 'f' AND conparentid = 0 ORDER BY conname"), {"table": table}).all()
    return _Catalog({name: definition for name, definition in indexes if name not in keys}, dict(triggers),
                    dict(foreign_keys))


def _identities(table: str, sequence_of: str) -> list[Identity]:
    """The table's identity columns, each with the next value of `sequence_of`'s sequence (taken, never given)."""
    columns = op.get_bind().execute(text(
        "SELECT attname, attidentity FROM pg_attribute WHERE attrelid = CAST(:table AS regclass) "
        "AND attidentity <> '' AND NOT attisdropped ORDER BY attnum"), {"table": table}).all()
    next_value = text("SELECT nextval(pg_get_serial_sequence(:table, :column))")
    return [Identity(column, "ALWAYS" if kind == "a" else "BY DEFAULT",
                     op.get_bind().execute(next_value, {"table": sequence_of, "column": column}).scalar_one())
            for column, kind in columns]
