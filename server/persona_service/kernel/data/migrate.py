"""Apply Alembic migrations (the only way the schema is made, tests included).

One linear chain of revisions spread over several version directories:
each module's own (`<domain>/migrations/`, named in `Module.migrations`)
holds the revisions that touch only its tables; `migrations/versions/` holds
the kernel's tables' revisions and those that touch several modules' tables.
A revision joins the chain through its `down_revision`, whichever directory
holds it, so callers pass every module's directory (the registry's
`MODULES.migrations`): with one missing, the chain has a gap and Alembic
refuses to run."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic loads where it is used (migrating, a readiness check), not with every process (docs/testing.md).
MIGRATIONS = pathlib.Path(__file__).resolve().parents[4] / "migrations"


def alembic_config(database_url: str, version_dirs: Iterable[pathlib.Path]) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    locations = [str(MIGRATIONS / "versions"), *(str(d) for d in version_dirs)]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", os.pathsep.join(locations))
    return cfg


def upgrade(database_url: str, version_dirs: Iterable[pathlib.Path], revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(database_url, version_dirs), revision)
