"""What a generation run costs the database (personas/generation.py): its steps are written in one statement as
the run ends (issue 50: one INSERT per step before), in order, with what each step made."""

from __future__ import annotations

import uuid

from persona_service.kernel.data.work import Work
from persona_service.kernel.operations import drain
from persona_service.personas.generation import STEPS, GenerationPipeline, RunSpec
from persona_service.providers.factory import make_base_provider
from sqlalchemy import event, text


def _recording(conn, statements: list[str]) -> None:
    """Every statement `conn` sends: SQLAlchemy's and the prepared ones run on its driver connection."""
    event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
    raw = conn.connection.driver_connection
    execute = raw.execute
    raw.execute = lambda sql, *args, **kwargs: (statements.append(str(sql)), execute(sql, *args, **kwargs))[1]


def test_a_run_writes_its_steps_in_one_statement(engine, tenant):
    statements: list[str] = []
    spec = RunSpec("create", tenant.org_id, tenant.workspace_id, str(uuid.uuid4()), "A ferry pilot who sings")
    with engine.connect() as conn:
        _recording(conn, statements)
        result = drain(GenerationPipeline(Work.on(conn), make_base_provider()).run(spec))
        steps = conn.execute(text("SELECT step, status, output FROM generation_steps WHERE run_id = :r "
                                  "ORDER BY ordinal"), {"r": result.run_id}).all()
        run = conn.execute(text("SELECT status, started_at <= finished_at, error_code FROM generation_runs "
                                "WHERE id = :r"), {"r": result.run_id}).one()
        conn.rollback()
        del conn.connection.driver_connection.execute  # (the pooled connection's own method again)
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO GENERATION_STEPS")]
    assert len(inserts) == 1
    assert [(step, status) for step, status, _ in steps] == [(step, "completed") for step in STEPS]
    outputs = {step: output for step, _, output in steps}  # what each step answered, as written
    assert (result.soul.to_json(), result.voice.to_json(), result.fingerprint.to_json()) == (
        outputs["draft_soul"], outputs["write_voice"], outputs["fingerprint"])
    assert (result.audit_score, result.audited) == (outputs["audit"]["score"], True)
    # The run is written once, as it ended (issue 50: it was inserted as it began, then updated).
    runs = [s for s in statements if "GENERATION_RUNS" in s.upper() and not s.lstrip().upper().startswith("SELECT")]
    assert len(runs) == 1 and runs[0].lstrip().upper().startswith("INSERT")
    assert tuple(run) == ("completed", True, "")
