"""A module ships its own migrations (`Module.migrations`): its version
directory joins the one linear chain, so `migrate` applies it after the
kernel's history on a fresh database."""

from __future__ import annotations

import os
import textwrap

import pytest
from alembic.script import ScriptDirectory
from persona_service.kernel.db import migrate
from persona_service.kernel.db.engine import make_engine
from persona_service.kernel.embedded import postgres_url
from sqlalchemy import inspect, text


def test_a_modules_version_directory_is_applied_after_the_kernel_history(tmp_path):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("needs a database of its own")
    head = ScriptDirectory.from_config(migrate.alembic_config("postgresql://unused")).get_current_head()
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
    url = postgres_url(tmp_path / "postgres")
    migrate.upgrade(url, [versions])
    engine = make_engine(url, pool_size=1)
    try:
        assert "probe_items" in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "probe_0100"
    finally:
        engine.dispose()
