"""What a generation run costs the database (personas/generation.py): its steps are written in one statement as
the run ends (issue 50: one INSERT per step before), in order, with what each step made."""

from __future__ import annotations

import uuid

from persona_service.kernel.operations import drain
from persona_service.personas.generation import STEPS, GenerationPipeline, RunSpec
from persona_service.providers.factory import make_base_provider
from sqlalchemy import event, text


def test_a_run_writes_its_steps_in_one_statement(engine, tenant):
    statements: list[str] = []
    spec = RunSpec("create", tenant.org_id, tenant.workspace_id, str(uuid.uuid4()), "A ferry pilot who sings")
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        result = drain(GenerationPipeline(conn, make_base_provider()).run(spec))
        steps = conn.execute(text("SELECT step, status, output FROM generation_steps WHERE run_id = :r "
                                  "ORDER BY ordinal"), {"r": result.run_id}).all()
        conn.rollback()
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO GENERATION_STEPS")]
    assert len(inserts) == 1
    assert [(step, status) for step, status, _ in steps] == [(step, "completed") for step in STEPS]
    outputs = {step: output for step, _, output in steps}  # what each step answered, as written
    assert (result.soul, result.voice, result.fingerprint) == (outputs["draft_soul"], outputs["write_voice"],
                                                               outputs["fingerprint"])
    assert (result.audit_score, result.audited) == (outputs["audit"]["score"], True)
