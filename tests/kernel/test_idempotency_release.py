"""What frees a claimed Idempotency-Key for the client's retry when its call
did not end normally (scripts/topology.py measured both): a call that failed
because PostgreSQL was away (a PgBouncer or PostgreSQL restart) releases it
once PostgreSQL is back; the claim of a call whose process was killed lapses
a lock's length after its process stopped renewing it, while a live
process's claim holds however long its call runs. Before, both waited for
the claim's one fixed lock (5 minutes), refusing the retry `in_flight`."""

from __future__ import annotations

import contextlib
import time
import types
import uuid
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from persona_service.kernel.errors import IdempotencyConflict
from persona_service.kernel.principal import Principal
from persona_service.kernel.secretbox import SecretBox
from persona_service.kernel.transport import idempotency as idempotency_module
from persona_service.kernel.transport.idempotency import Idempotency
from sqlalchemy.exc import OperationalError

METHOD = "/persona.v1.PersonaService/CreatePersona"


def _caller(tenants) -> Principal:
    t = tenants()
    return Principal("api_key", f"key_{uuid.uuid4().hex[:12]}", t.org_id, t.workspace_id, t.user_id, frozenset(),
                     None, t.plan, False)


def _takes_over(idempotency: Idempotency, caller: Principal, key: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while True:
        try:
            idempotency.begin(caller, key, METHOD, "digest")
            return True
        except IdempotencyConflict:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def test_a_live_call_keeps_its_claim_and_a_killed_ones_lapses(engine, tenants, monkeypatch):
    monkeypatch.setattr(idempotency_module, "LOCK", timedelta(seconds=1))
    caller, key = _caller(tenants), str(uuid.uuid4())
    box = SecretBox(Fernet.generate_key().decode())
    node_a, node_b = Idempotency(engine, box), Idempotency(engine, box)
    node_a.begin(caller, key, METHOD, "digest")
    # A's call runs for three locks' length: its claim is renewed, B's retry is refused meanwhile.
    assert not _takes_over(node_b, caller, key, within=3)
    node_a._held.clear()  # A is killed: nothing renews its claim any more
    assert _takes_over(node_b, caller, key, within=3)


def test_a_release_postgresql_refused_is_retried_until_it_is_back(engine, tenants, monkeypatch):
    caller, key = _caller(tenants), str(uuid.uuid4())
    idempotency = Idempotency(engine, SecretBox(Fernet.generate_key().decode()))
    claim, replay = idempotency.begin(caller, key, METHOD, "digest")
    assert replay is None

    release = Idempotency._release
    # Refused as the call ends, and again at the first retry (PostgreSQL still away): retried until it is back.
    refusals = [OperationalError("DELETE FROM idempotency_keys", {}, Exception("server closed the connection"))] * 2

    def away_once(self, claim):
        if refusals:
            raise refusals.pop()
        release(self, claim)

    monkeypatch.setattr(Idempotency, "_release", away_once)
    idempotency.release(claim)  # the call's own 503 goes out; the release is not lost
    assert _takes_over(idempotency, caller, key, within=10) and not refusals


def test_a_claim_whose_commit_failed_lapses_as_a_killed_calls_does(engine, tenants, monkeypatch):
    """PgBouncer restarting as the claim commits: the call sees its connection drop (503) while PostgreSQL
    may have committed the claim. No call will settle it, so nothing renews it: the retry takes it over once
    its lock lapses, not `in_flight` for as long as the process lives."""
    monkeypatch.setattr(idempotency_module, "LOCK", timedelta(seconds=1))
    caller, key = _caller(tenants), str(uuid.uuid4())
    idempotency = Idempotency(engine, SecretBox(Fernet.generate_key().decode()))

    @contextlib.contextmanager
    def committed_then_dropped():
        with engine.begin() as conn:
            yield conn
        raise OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(idempotency, "engine", types.SimpleNamespace(begin=committed_then_dropped))
    with pytest.raises(OperationalError):
        idempotency.begin(caller, key, METHOD, "digest")
    monkeypatch.setattr(idempotency, "engine", engine)
    assert _takes_over(idempotency, caller, key, within=3)


def test_a_refusal_committed_with_the_calls_changes_is_replayed_to_the_retry(engine, tenants):
    """`ApiError.persist` (a persona flagged by its audit): the refusal is the call's outcome, kept for the key."""
    caller, key = _caller(tenants), str(uuid.uuid4())
    idempotency = Idempotency(engine, SecretBox(Fernet.generate_key().decode()))
    claim, _ = idempotency.begin(caller, key, METHOD, "digest")
    body = '{"error": {"code": "moderation_blocked"}}'
    idempotency.fail(claim, 422, body, {"x-request-id": "req_1"})
    _, replay = idempotency.begin(caller, key, METHOD, "digest")
    assert replay is not None and (replay.response, replay.error_status, replay.error_body, replay.headers) == (
        None, 422, body, {"x-request-id": "req_1"})


def _keyed_write(engine, idempotency: Idempotency, caller: Principal, key: str):
    """A unary write's call past its operation, holding `key`'s claim, with its unit of work on `engine`."""
    from google.protobuf import empty_pb2
    from persona.v1 import options_pb2
    from persona_service.kernel.data.uow import UnitOfWork
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.stages.call import Call

    meta = MethodMeta(METHOD, options_pb2.MethodPolicy(write=True), "persona.create", "persona", empty_pb2.Empty)
    ctx = RequestContext(request_id=str(uuid.uuid4()), method=METHOD, uow=UnitOfWork(engine), client_ip="10.0.0.1",
                         principal=caller)
    call = Call(ctx, {}, meta, empty_pb2.Empty(), None)
    call.claim, replay = idempotency.begin(caller, key, METHOD, "digest")
    assert replay is None
    return call


@pytest.mark.parametrize("went_through", [True, False])
def test_a_keyed_write_whose_commit_went_unanswered_is_answered_as_it_ended(engine, tenants, went_through):
    """PgBouncer restarting as the write commits: the call's COMMIT fails with a lost connection, whether
    PostgreSQL committed or not. Committed, the call succeeds (its retry replays it); before, the call answered
    503 and released the key, and its retry ran the write a second time. Not committed, the 503 stands."""
    from persona_service.kernel.transport.context import unit_of_work
    from persona_service.kernel.transport.stages.commit import Commit
    from support import commit_unanswered

    caller, key = _caller(tenants), str(uuid.uuid4())
    idempotency = Idempotency(engine, SecretBox(Fernet.generate_key().decode()))
    call = _keyed_write(engine, idempotency, caller, key)
    commit = Commit(None, idempotency, engine)  # type: ignore[arg-type]  (no run)
    try:
        with commit_unanswered(engine, went_through):
            if went_through:
                commit.complete(call, call.request, call.request)
            else:
                with pytest.raises(OperationalError):
                    commit.complete(call, call.request, call.request)
    finally:
        unit_of_work(call.ctx).close()
    assert call.succeeded is went_through
    if not went_through:
        idempotency.release(call.claim)  # as the call's failure does (outcome)
    else:
        _claim, replay = idempotency.begin(caller, key, METHOD, "digest")
        assert replay is not None and replay.response == b""  # the Empty it answered
