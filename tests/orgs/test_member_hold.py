"""The caller's membership hold, first in every write (kernel.transport.stages.hold), runs prepared
(orgs/repository.py `hold_member`, issue 50: no SQLAlchemy layers per execution): it holds the row FOR SHARE
(another transaction cannot lock it FOR UPDATE meanwhile) and finds nothing for a user who is not a member."""

from __future__ import annotations

import pytest
from persona_service.orgs.repository import OrgRepository
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError


def test_the_hold_is_prepared_and_holds_the_membership(engine, tenant):
    statements: list[str] = []
    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        assert OrgRepository(conn).hold_member(tenant.org_id, tenant.user_id)
        assert statements == []  # none went through SQLAlchemy
        with engine.connect() as other, pytest.raises(OperationalError):
            other.execute(text("SELECT 1 FROM memberships WHERE org_id = :o AND user_id = :u FOR UPDATE NOWAIT"),
                          {"o": tenant.org_id, "u": tenant.user_id})
        assert not OrgRepository(conn).hold_member(tenant.org_id, "usr_not_a_member")
        conn.rollback()
