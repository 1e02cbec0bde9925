"""Apply Alembic migrations (the only way the schema is made, tests included)."""

from __future__ import annotations

import pathlib

from alembic import command
from alembic.config import Config

MIGRATIONS = pathlib.Path(__file__).resolve().parents[3] / "migrations"


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)
