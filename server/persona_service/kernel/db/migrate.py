"""Apply Alembic migrations (the only way the schema is made, tests included).

`migrations/versions/` holds the kernel's and wave-1 history (one linear
chain); a module added later ships its own version directory
(`Module.migrations`), joined to the same chain through `down_revision`."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable

from alembic import command
from alembic.config import Config

MIGRATIONS = pathlib.Path(__file__).resolve().parents[4] / "migrations"


def alembic_config(database_url: str, version_dirs: Iterable[pathlib.Path] = ()) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    locations = [str(MIGRATIONS / "versions"), *(str(d) for d in version_dirs)]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(locations))
    return cfg


def upgrade(database_url: str, version_dirs: Iterable[pathlib.Path] = (), revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url, version_dirs), revision)
