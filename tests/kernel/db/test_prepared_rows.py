"""A list of rows' INSERT (a unit of work's events, a generation run's steps) compiled once per row count and run
prepared (kernel/data/prepared.py `PreparedRows`, issue 50: SQLAlchemy caches no INSERT of a list of rows, so
each was compiled again): the rows are the ones Core wrote, in their order, JSON None as JSON null as Core's JSONB
wrote it; a count above `ROWS_KEPT` is compiled for itself, not kept; a type that converts values is refused."""

from __future__ import annotations

import datetime
import uuid

import pytest
from persona_service.kernel.data import prepared
from persona_service.kernel.data.prepared import ROWS_KEPT, PreparedRows
from persona_service.personas.repository import _runs, _steps
from sqlalchemy import Column, Integer, MetaData, PickleType, Table, event, insert, text


def _run(conn, run_id: str, tenant) -> None:
    now = datetime.datetime.now(datetime.UTC)
    conn.execute(insert(_runs).values(id=run_id, org_id=tenant.org_id, workspace_id=tenant.workspace_id,
                                      persona_id=str(uuid.uuid4()), kind="create", status="completed",
                                      started_at=now))


def _steps_of(n: int, run_id: str) -> list[dict]:
    now = datetime.datetime.now(datetime.UTC)
    return [{"run_id": run_id, "step": f"s{i}", "ordinal": i, "status": "completed", "started_at": now,
             "finished_at": now, "duration_ms": i, "attempts": 1, "output": {"i": i, "list": ["a", None]},
             "error": None if i % 2 else {"code": "x", "message": "y"}} for i in range(n)]


def _stored(conn, run_id: str) -> list[tuple]:
    return [tuple(row) for row in conn.execute(text(
        "SELECT step, ordinal, output, error, jsonb_typeof(error) FROM generation_steps WHERE run_id = :r "
        "ORDER BY ordinal"), {"r": run_id})]


def test_rows_are_the_ones_core_wrote_in_one_prepared_statement(engine, tenant):
    rows = PreparedRows(_steps, tuple(c.name for c in _steps.c))
    ours, core = f"run_{uuid.uuid4().hex[:20]}", f"run_{uuid.uuid4().hex[:20]}"
    statements: list[str] = []
    with engine.connect() as conn:
        _run(conn, ours, tenant)
        _run(conn, core, tenant)
        conn.execute(insert(_steps).values(_steps_of(3, core)))
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        rows.run(conn, _steps_of(3, ours))
        assert statements == []  # none went through SQLAlchemy
        mine, theirs = _stored(conn, ours), _stored(conn, core)
        conn.rollback()
    assert [row[1:] for row in mine] == [row[1:] for row in theirs]
    assert [row[0] for row in mine] == ["s0", "s1", "s2"]
    assert mine[1][3:] == (None, "null")  # JSON null, as SQLAlchemy's JSONB wrote it
    assert set(rows._sql) == {3}


def test_a_longer_batch_is_compiled_for_itself_and_a_converting_type_is_refused(engine, tenant):
    rows = PreparedRows(_steps, tuple(c.name for c in _steps.c))
    run_id = f"run_{uuid.uuid4().hex[:20]}"
    prepares: list[bool] = []
    execute = prepared._execute

    def recorded(conn, sql, params, decides_nothing, prepare=True):
        prepares.append(prepare)
        return execute(conn, sql, params, decides_nothing, prepare)

    prepared._execute = recorded
    try:
        with engine.connect() as conn:
            _run(conn, run_id, tenant)
            rows.run(conn, _steps_of(ROWS_KEPT + 1, run_id))
            assert len(_stored(conn, run_id)) == ROWS_KEPT + 1
            conn.rollback()
    finally:
        prepared._execute = execute
    assert prepares == [False] and rows._sql == {}
    pickled = Table("t", MetaData(), Column("id", Integer, primary_key=True), Column("p", PickleType))
    with pytest.raises(TypeError, match="converts values"):
        PreparedRows(pickled, ("id", "p"))
