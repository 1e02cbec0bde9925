"""A keyless write whose COMMIT went unanswered (PgBouncer or PostgreSQL restarting as it commits) is answered as
it ended, as a keyed one is (tests/kernel/test_idempotency_release.py): nothing the transaction wrote names it, so
the Commit stage reads its transaction's id before the COMMIT and asks PostgreSQL for its fate once the database
answers (outages.committed). Before, the call answered 503 whatever happened, and a client retrying it made the
write twice."""

from __future__ import annotations

import threading
import uuid

import pytest
from google.protobuf import empty_pb2
from persona.v1 import options_pb2
from persona_service.kernel.data.outages import committed
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.context import RequestContext, unit_of_work
from persona_service.kernel.transport.policy import MethodMeta
from persona_service.kernel.transport.stages.call import Call
from persona_service.kernel.transport.stages.commit import Commit
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from support import commit_unanswered

METHOD = "/persona.v1.PersonaService/CreatePersona"


def _keyless_write(engine, tenants) -> Call:
    """An audited unary write's call past its operation, with no Idempotency-Key: its audit entry, written in the
    call's transaction, is what committed or not."""
    t = tenants()
    caller = Principal("api_key", f"key_{uuid.uuid4().hex[:12]}", t.org_id, t.workspace_id, t.user_id, frozenset(),
                       None, t.plan, False)
    meta = MethodMeta(METHOD, options_pb2.MethodPolicy(write=True), "persona.create", "persona", empty_pb2.Empty)
    ctx = RequestContext(request_id=str(uuid.uuid4()), method=METHOD, uow=UnitOfWork(engine), client_ip="10.0.0.1",
                         principal=caller)
    return Call(ctx, {}, meta, empty_pb2.Empty(), None)


def _audited(engine, request_id: str) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM audit_events WHERE request_id = :r"), {"r": request_id}).scalar_one()


@pytest.mark.parametrize("went_through", [True, False])
def test_a_keyless_write_whose_commit_went_unanswered_is_answered_as_it_ended(engine, tenants, went_through):
    """Committed, the call succeeds (its client does not write again); rolled back, the 503 stands (a retry is
    safe). Fails if the stage answers every lost COMMIT alike, either way."""
    call = _keyless_write(engine, tenants)
    commit = Commit(None, None, engine)  # type: ignore[arg-type]  (no run, no key)
    try:
        with commit_unanswered(engine, went_through):
            if went_through:
                commit.complete(call, call.message, empty_pb2.Empty())
            else:
                with pytest.raises(OperationalError):
                    commit.complete(call, call.message, empty_pb2.Empty())
    finally:
        unit_of_work(call.ctx).close()
    assert call.succeeded is went_through
    assert _audited(engine, call.ctx.request_id) == int(went_through)


def test_a_transaction_is_known_by_its_id_until_it_ends(engine):
    """What the stage asks: an open transaction is 'in progress' (asked again until it ends, within the time
    given), a committed one is known as such, a rolled-back one is not committed."""
    uow = UnitOfWork(engine)
    assert uow.transaction_id() is None  # nothing begun
    uow.conn.execute(text("SELECT 1"))
    assert uow.transaction_id() is None  # a transaction that wrote nothing has no id: nothing to settle
    uow.conn.execute(text("CREATE TEMPORARY TABLE in_doubt_probe (id int)"))
    xid = uow.transaction_id()
    assert xid is not None
    assert not committed(engine, xid, 0.3)  # still open: not committed, after asking again for 0.3 s
    threading.Timer(0.3, uow.commit).start()
    assert committed(engine, xid, 5)  # asked again while in progress, until its COMMIT
    uow.close()
    rolled_back = UnitOfWork(engine)
    rolled_back.conn.execute(text("CREATE TEMPORARY TABLE in_doubt_probe (id int)"))
    xid = rolled_back.transaction_id()
    rolled_back.close()
    assert xid is not None and not committed(engine, xid, 5)
