"""A slug the service derives (kernel.data.unique.derive_unique with PersonaRepository.insert_unless_slug_taken):
one INSERT … ON CONFLICT DO NOTHING a candidate, no savepoint (issue 50: the savepoint was 15% of a persona
creation's server time), and the answer a serial order gives when another transaction holds the slug."""

from __future__ import annotations

import threading
import uuid

import pytest
from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.unique import derive_unique
from persona_service.kernel.errors import StateConflict
from persona_service.personas.records import NewPersona
from persona_service.personas.repository import SLUG_CONSTRAINT, PersonaRepository
from persona_service.personas.step_records import Soul
from sqlalchemy import event


def persona(tenant, slug: str) -> NewPersona:
    now, persona_id = utcnow(), str(uuid.uuid4())
    return NewPersona(id=persona_id, org_id=tenant.org_id, workspace_id=tenant.workspace_id, slug=slug,
                      display_name="Zq", visibility="private", metadata={}, intent="A test", soul=Soul("Zq", ""),
                      parent_id=None, root_id=persona_id, fork_ordinal=0, fork_note="", audit_score=None,
                      last_run_id="", card_extra=None, created_at=now, updated_at=now)


def recording(conn, statements: list[str]):
    """Records every statement `conn` sends, SQLAlchemy's and the prepared ones (kernel.data.prepared) run on its
    driver connection, until the function it returns is called."""
    def record(*args) -> None:
        statements.append(args[2])

    event.listen(conn, "before_cursor_execute", record)
    raw = conn.connection.driver_connection
    execute = raw.execute
    raw.execute = lambda sql, *args, **kwargs: (statements.append(str(sql)), execute(sql, *args, **kwargs))[1]

    def stop() -> None:
        event.remove(conn, "before_cursor_execute", record)
        del raw.execute  # the driver connection's own method again

    return stop


def derive(conn, tenant, base: str, tries: int = 3) -> str:
    repo = PersonaRepository(conn)
    row = derive_unique(SLUG_CONSTRAINT, lambda n: base if n == 0 else f"{base}-{n}",
                        lambda slug: repo.insert_unless_slug_taken(persona(tenant, slug)), tries)
    return row.slug


def test_a_taken_slug_is_derived_again_without_a_savepoint(engine, tenant):
    base = "zq" + uuid.uuid4().hex[:8]
    statements: list[str] = []
    with engine.connect() as conn:
        conn.begin()
        stop = recording(conn, statements)
        assert derive(conn, tenant, base) == base
        assert derive(conn, tenant, base) == f"{base}-1"
        assert derive(conn, tenant, base) == f"{base}-2"
        with pytest.raises(StateConflict) as refused:  # every candidate taken: the caller's conflict
            derive(conn, tenant, base)
        stop()
        conn.rollback()
    assert refused.value.details["conflictField"] == "slug"
    assert not [s for s in statements if "SAVEPOINT" in s.upper()]
    assert len([s for s in statements if s.lstrip().upper().startswith("INSERT INTO PERSONAS")]) == 1 + 2 + 3 + 3


@pytest.mark.parametrize("holder_commits", [True, False])
def test_a_slug_another_transaction_holds_waits_for_its_end(engine, tenant, holder_commits):
    """The serial answer: the next candidate when the holder commits, the slug itself when it rolls back."""
    base = "zq" + uuid.uuid4().hex[:8]
    derived: list[str] = []
    with engine.connect() as holder:
        holder.begin()
        PersonaRepository(holder).insert(persona(tenant, base))

        def second() -> None:
            with engine.begin() as conn:
                derived.append(derive(conn, tenant, base))

        deriving = threading.Thread(target=second)
        deriving.start()
        deriving.join(timeout=1)  # not a timing assertion: it must still be waiting whatever the machine's load
        assert deriving.is_alive() and not derived
        holder.commit() if holder_commits else holder.rollback()
    deriving.join(timeout=30)
    assert derived == [f"{base}-1" if holder_commits else base]
