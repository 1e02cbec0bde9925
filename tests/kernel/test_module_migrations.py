"""The migrations: one linear chain of revisions over the shared directory
(`migrations/versions/`: the kernel's tables, and revisions that touch
several modules' tables) and each module's own (`<domain>/migrations/`,
`Module.migrations`). A database migrated while every revision lived in
one directory upgrades cleanly; a module's new directory joins the chain;
and the schema the migrations make is the one the `tables.py` files
declare (the drift check, Alembic's metadata comparison)."""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
import warnings

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from persona_service.kernel.db import migrate
from persona_service.kernel.db.base import Base
from persona_service.kernel.db.engine import make_engine
from persona_service.kernel.embedded import postgres_url
from persona_service.registry import MODULES
from sqlalchemy import Column, MetaData, String, Text, inspect, make_url, text

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
    from pgserver._commands import POSTGRES_BIN_PATH  # the server's own pg_dump (a system one may be older)

    return subprocess.run([POSTGRES_BIN_PATH / "pg_dump", "--schema-only", "--no-owner", "-d", url],
                          capture_output=True, text=True, check=True).stdout


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


def schema_drift(url: str, metadata: MetaData) -> list:
    """What Alembic's autogenerate would change to make the database match
    `metadata`. Not compared (Alembic cannot): triggers and functions (0014),
    and the one expression index with an operator class
    (ix_scim_users_user_name_prefix, 0015); the layout test's schema dump covers them."""
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*operator clause.*")
            context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            return compare_metadata(context, metadata)
    finally:
        engine.dispose()


def test_the_tables_match_the_migrations(migrated):
    assert schema_drift(migrated, Base.metadata) == []


def _column_added(metadata: MetaData) -> None:
    metadata.tables["personas"].append_column(Column("planted", Text))


def _type_changed(metadata: MetaData) -> None:
    metadata.tables["invoices"].c.currency.type = String(8)


@pytest.mark.parametrize("plant", [_column_added, _type_changed], ids=lambda f: f.__name__.strip("_"))
def test_the_drift_check_fails_when_tables_and_migrations_disagree(migrated, plant):
    planted = MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(planted)
    plant(planted)
    assert schema_drift(migrated, planted), f"{plant.__name__} went unnoticed"


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
