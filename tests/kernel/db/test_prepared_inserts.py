"""The audit entry and the quota draw, written by every audited call and every generation, run as prepared
INSERTs (kernel/data/prepared.py `PreparedInsert`, issue 50: no SQLAlchemy layers per execution): the rows are
the ones Core wrote (the details as JSONB, the server's defaults for the columns left out), and a first statement
of a connection still commits with it."""

from __future__ import annotations

import uuid

from persona_service.kernel.data.quota_repository import QuotaRepository
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.audit import AuditEntry, AuditLog
from sqlalchemy import event, text


def test_the_audit_entry_and_the_quota_draw_are_prepared_and_committed(engine, tenant):
    request_id = f"prepared-{uuid.uuid4().hex}"
    details = {"createdId": "persona_x", "nested": {"n": 1, "list": ["a", None]}}
    statements: list[str] = []
    with engine.connect() as conn:  # no transaction begun: the INSERT is the connection's first statement
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        AuditLog(Work.on(conn)).record(AuditEntry(action="persona.create", outcome="success", status=200,
                                         request_id=request_id, client_ip="127.0.0.1", org_id=tenant.org_id,
                                         workspace_id=tenant.workspace_id, resource_type="persona",
                                         resource_id="persona_x", details=details))
        QuotaRepository(conn).draw(tenant.org_id, request_id[:40])
        assert statements == []  # none went through SQLAlchemy
        conn.commit()
    with engine.connect() as conn:
        row = conn.execute(text("SELECT action, outcome, status, org_id, workspace_id, actor_user_id, resource_type, "
                                "resource_id, error_code, client_ip, details, occurred_at IS NOT NULL AS stamped "
                                "FROM audit_events WHERE request_id = :r"), {"r": request_id}).mappings().one()
        drawn = conn.execute(text("SELECT count(*) FROM quota_draws WHERE org_id = :o AND quota = :q "
                                  "AND drawn_at IS NOT NULL"), {"o": tenant.org_id, "q": request_id[:40]}).scalar()
    assert dict(row) == {"action": "persona.create", "outcome": "success", "status": 200, "org_id": tenant.org_id,
                         "workspace_id": tenant.workspace_id, "actor_user_id": None, "resource_type": "persona",
                         "resource_id": "persona_x", "error_code": "", "client_ip": "127.0.0.1", "details": details,
                         "stamped": True}
    assert drawn == 1
