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

import logging
import os
import pathlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import text

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection

# Alembic loads where it is used (migrating, a readiness check), not with every process (docs/testing.md).
MIGRATIONS = pathlib.Path(__file__).resolve().parents[4] / "migrations"


def applied_heads(conn: Connection, timeout_ms: int) -> set[str]:
    """The migration heads the database is at, given at most `timeout_ms` to answer (readiness)."""
    conn.execute(text(f"SET LOCAL statement_timeout = {int(timeout_ms)}"))
    return set(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())


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


def upgrade_logged(database_url: str, version_dirs: Iterable[pathlib.Path], log_file: pathlib.Path) -> str:
    """`upgrade`, with Alembic's lines (its setup's, and one per revision applied: 38 lines on a new database) in
    `log_file` rather than on the console of `up`, whose banner is then the first thing a user reads (issue 48);
    on the console too at DEBUG. Returns one line saying what was done, for the banner."""
    version_dirs = list(version_dirs)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    alembic_log = logging.getLogger("alembic")
    to_file = logging.FileHandler(log_file)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    applied: list[str] = []
    counter = _Applied(applied)
    saved = alembic_log.propagate, alembic_log.level
    alembic_log.addHandler(to_file)
    alembic_log.addHandler(counter)
    alembic_log.setLevel(logging.INFO)
    alembic_log.propagate = logging.getLogger().isEnabledFor(logging.DEBUG)
    try:  # (Alembic's imports log too: its plugins' setup)
        from alembic.script import ScriptDirectory

        upgrade(database_url, version_dirs)
        heads = ", ".join(ScriptDirectory.from_config(alembic_config(database_url, version_dirs)).get_heads())
    finally:
        alembic_log.removeHandler(to_file)
        alembic_log.removeHandler(counter)
        alembic_log.propagate, alembic_log.level = saved
        to_file.close()
    if not applied:
        return f"schema up to date (revision {heads})"
    return f"{len(applied)} migration{'s' if len(applied) != 1 else ''} applied, now at revision {heads} (each in {log_file})"


class _Applied(logging.Handler):
    """Counts the revisions Alembic applies (its "Running upgrade A -> B, …" lines)."""

    def __init__(self, into: list[str]):
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "alembic.runtime.migration" and record.getMessage().startswith("Running upgrade"):
            self.into.append(record.getMessage())
