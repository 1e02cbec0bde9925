"""Every write with a caller begins its unit of work by holding the caller's membership (kernel/transport/stages/
hold.py), on the stack's PostgreSQL with the lock guard on: the operation runs with the membership held FOR SHARE
(so the caller's erasure, which locks it FOR UPDATE first, waits), a caller no longer a member is refused before
the operation runs, and a statement planted before the hold is refused by the guard, as a stage put between the
unit of work's start and the hold (or a path that skipped it) would be. Which writes are not held is pinned: the
erasure and SCIM's writes, which take their locks in the erasure's own order (docs/concurrency.md)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from google.protobuf import empty_pb2
from persona.v1 import options_pb2
from persona_service.chat.repository import ChatSessionRepository
from persona_service.kernel.data import aggregates
from persona_service.kernel.data.aggregates import LockGuard, LockOrderViolation
from persona_service.kernel.data.quota_repository import QuotaRepository
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.errors import Unauthorized
from persona_service.kernel.principal import SCOPES, Principal
from persona_service.kernel.transport.auth import Authenticator, CredentialCache
from persona_service.kernel.transport.context import RequestContext, unit_of_work
from persona_service.kernel.transport.policy import MethodMeta, find_services, method_table
from persona_service.kernel.transport.stages import build, compose
from persona_service.kernel.transport.stages.call import Call, Stage
from persona_service.kernel.transport.stages.commit import Commit
from persona_service.orgs.credentials import OrgCredentialStore
from persona_service.registry import MODULES
from sqlalchemy import text
from support import engine_for, wait_until

PATH = "/persona.v1.PersonaService/UpdatePersona"
MEMBERSHIP = "SELECT 1 FROM memberships WHERE org_id = :o AND user_id = :u FOR UPDATE NOWAIT"


class Done(Exception):
    """Ends the operation once it checked what it came for: nothing commits."""


@pytest.fixture()
def guarded(stack):
    with engine_for(stack, pool_size=3) as engine:
        LockGuard(aggregates.ORDER).install(engine)
        yield engine


def _principal(org_id: str, user_id: str, workspace_id: str) -> Principal:
    return Principal("api_key", "key_test", org_id, workspace_id, user_id, frozenset(SCOPES), "member", "pro", False)


def _call(engine, principal: Principal, **policy: object) -> Call:
    meta = MethodMeta(PATH, options_pb2.MethodPolicy(write=True, **policy), "persona.update", "persona",
                      empty_pb2.Empty)
    ctx = RequestContext(request_id="req_hold", method=PATH, uow=UnitOfWork(engine), client_ip="10.0.0.1",
                         principal=principal)
    return Call(ctx, {}, meta, empty_pb2.Empty())


def _tail(engine, call: Call) -> list[Stage]:
    """The stages a unary write's operation runs inside, as the pipeline builds them (from Commit on)."""
    host = type("Host", (), {"authenticator": Authenticator("test", CredentialCache(0), store=OrgCredentialStore()),
                             "limiter": None, "limits": None, "runs": None, "idempotency": None, "replicas": None})()
    stages = build(host, call.meta, "unary", None, Commit(None, None, engine))  # type: ignore[arg-type]
    return stages[[type(s).__name__ for s in stages].index("Commit"):]


def _run(engine, call: Call, operation, planted: Stage | None = None) -> None:
    commit, *rest = _tail(engine, call)
    stages = [commit, *([planted] if planted is not None else []), *rest]
    try:
        with pytest.raises(Done):
            compose(stages, operation)(call)
    finally:
        unit_of_work(call.ctx).close()


def _held_by_another(engine, org_id: str, user_id: str) -> bool:
    """Whether another transaction holds the membership (a FOR UPDATE NOWAIT, as the erasure's lock, fails)."""
    with engine.connect() as other:
        try:
            other.execute(text(MEMBERSHIP), {"o": org_id, "u": user_id})
        except Exception as exc:  # noqa: BLE001 - only a lock that is not available counts
            assert isinstance(getattr(exc, "orig", None), psycopg.errors.LockNotAvailable), exc
            return True
        finally:
            other.rollback()
        return False


def test_a_writes_operation_runs_with_its_callers_membership_held(guarded, tenants):
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, member.user_id, member.workspace_id))
    seen: list[bool] = []

    def operation(call: Call) -> None:
        unit_of_work(call.ctx).conn.execute(text("SELECT 1"))  # the service's first statement: after the hold, so the guard passes
        seen.append(_held_by_another(guarded, member.org_id, member.user_id))
        raise Done

    _run(guarded, call, operation)
    assert seen == [True]
    assert not _held_by_another(guarded, member.org_id, member.user_id)  # released with the unit of work


def test_a_caller_no_longer_a_member_is_refused_before_the_operation_runs(guarded, tenants):
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, "usr_erased_long_ago", member.workspace_id))
    ran: list[bool] = []
    with pytest.raises(Unauthorized):
        compose(_tail(guarded, call), lambda call: ran.append(True))(call)
    unit_of_work(call.ctx).close()
    assert ran == []


class Planted(Stage):
    """A stage that runs a statement in the unit of work before the hold (the violation the guard exists for)."""

    def __call__(self, call: Call) -> object:
        unit_of_work(call.ctx).conn.execute(text("SELECT 1"))
        return self.then(call)


def test_a_statement_planted_before_the_hold_is_refused(guarded, tenants):
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, member.user_id, member.workspace_id))
    commit, *rest = _tail(guarded, call)
    with pytest.raises(LockOrderViolation, match="before the caller's membership hold"):
        compose([commit, Planted(), *rest], lambda call: None)(call)
    unit_of_work(call.ctx).close()


def test_a_hold_left_out_is_refused_at_the_operations_first_statement(guarded, tenants):
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, member.user_id, member.workspace_id))
    commit, *_ = _tail(guarded, call)  # Commit marks the hold due; no HoldCaller follows
    with pytest.raises(LockOrderViolation, match="before the caller's membership hold"):
        compose([commit], lambda call: unit_of_work(call.ctx).conn.execute(text("SELECT 1")))(call)
    unit_of_work(call.ctx).close()


class RecordsAQuotaWindow(Stage):
    """What the Limits stage does before the operation on a generation's first call in a new window: records the
    organization's quota window (an upsert of its `quota_windows` row) on the unit of work's connection."""

    def __call__(self, call: Call) -> object:
        start, end = datetime(2031, 1, 1, tzinfo=UTC), datetime(2031, 2, 1, tzinfo=UTC)
        QuotaRepository(unit_of_work(call.ctx).conn).counts_since(call.ctx.caller.org_id, start, end, start + timedelta(days=9))
        return self.then(call)


def _window_locked_by_another(engine, org_id: str) -> bool:
    with engine.connect() as other:
        try:
            other.execute(text("SELECT 1 FROM quota_windows WHERE org_id = :o FOR UPDATE NOWAIT"), {"o": org_id})
        except Exception as exc:  # noqa: BLE001 - only a lock that is not available counts
            assert isinstance(getattr(exc, "orig", None), psycopg.errors.LockNotAvailable), exc
            return True
        finally:
            other.rollback()
        return False


def test_the_quota_window_recorded_before_the_operation_is_not_held_through_it(guarded, tenants):
    """The hold comes first, then the quota: what a stage recorded before the operation (the quota window's row) is
    committed before the hold, so the operation runs holding the membership and not that row (the erasure's order
    has no place for a lock taken before the membership)."""
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, member.user_id, member.workspace_id), generation=True)
    seen: list[tuple[bool, bool]] = []

    def operation(call: Call) -> None:
        seen.append((_held_by_another(guarded, member.org_id, member.user_id),
                     _window_locked_by_another(guarded, member.org_id)))
        # A root locked by a Prepared statement (past SQLAlchemy) counts for what follows: the unit of work began
        # after the commit, not at SQLAlchemy's next statement (which would have reset what the guard saw).
        repo = ChatSessionRepository(unit_of_work(call.ctx).conn)
        repo.lock(member.workspace_id, "chat_session_00000000000000000000000000")
        repo.last_ordinal("chat_session_00000000000000000000000000")
        raise Done

    commit, *rest = _tail(guarded, call)
    try:
        with pytest.raises(Done):
            compose([RecordsAQuotaWindow(), commit, *rest], operation)(call)
    finally:
        unit_of_work(call.ctx).close()
    assert seen == [(True, False)]
    with guarded.begin() as conn:  # the window was recorded (committed), and is the test's only
        assert conn.execute(text("DELETE FROM quota_windows WHERE org_id = :o"), {"o": member.org_id}).rowcount == 1


def test_a_hold_due_after_statements_in_its_transaction_is_refused(guarded):
    uow = UnitOfWork(guarded)
    try:
        uow.conn.execute(text("SELECT 1"))  # a stage's statement, left uncommitted
        with pytest.raises(LockOrderViolation, match="ran statements before its caller's membership hold was due"):
            aggregates.expect_hold(uow.conn)
        uow.commit()
        aggregates.expect_hold(uow.conn)  # a new transaction: its first statement will be the hold
        with aggregates.holding(uow.conn):
            uow.conn.execute(text("SELECT 1"))
    finally:
        uow.close()


def test_a_write_ordering_its_own_member_locks_is_not_held(guarded, tenants):
    member = tenants.member()
    call = _call(guarded, _principal(member.org_id, member.user_id, member.workspace_id), own_member_order=True)
    seen: list[bool] = []

    def operation(call: Call) -> None:
        unit_of_work(call.ctx).conn.execute(text("SELECT 1"))
        seen.append(_held_by_another(guarded, member.org_id, member.user_id))
        raise Done

    _run(guarded, call, operation)
    assert seen == [False]


# The writes with a caller that take their own member locks: the erasure (it locks the memberships it ends FOR
# UPDATE, after SCIM's groups and user) and SCIM's writes (groups, then users, then the memberships they regrant:
# the erasure's order, which a membership held first would turn into a cycle). A new one is a reviewed change here.
OWN_ORDER = {
    "/persona.v1.PrivacyService/EraseMyData",
    *(f"/persona.v1.ScimService/{verb}Scim{kind}" for verb in ("Create", "Replace", "Patch", "Delete")
      for kind in ("User", "Group")),
}


def test_every_write_with_a_caller_is_held_but_the_declared_few():
    table = method_table(find_services(MODULES.service_names))
    writes = {path: meta for path, meta in table.items() if meta.policy.write and not meta.policy.anonymous}
    assert {path for path, meta in writes.items() if not meta.holds_caller} == OWN_ORDER
    assert len(writes) > len(OWN_ORDER) + 40  # the rest (chat, personas, keys, portraits, ...) are held


def _blocked_by(engine, pid: int) -> int:
    """How many backends wait on a lock `pid` holds (a connection of its own: a transaction sees one snapshot of
    pg_stat_activity)."""
    with engine.connect() as probe:
        return int(probe.execute(text("SELECT count(*) FROM pg_stat_activity WHERE :me = ANY(pg_blocking_pids(pid))"),
                                 {"me": pid}).scalar_one())


def test_a_streams_run_begins_with_its_callers_hold(http, engine, tenants):
    """A streaming write runs as a durable run, outside Commit (RequestPipeline._produce): it holds its caller too.
    With the membership locked as the erasure locks it, the stream's run waits on that lock (nothing else of a
    persona's create touches the membership), and goes on once it is released."""
    member = tenants.member()
    answers: list[int] = []
    with engine.connect() as erasing:
        erasing.execute(text(MEMBERSHIP.replace(" NOWAIT", "")), {"o": member.org_id, "u": member.user_id})
        me = erasing.execute(text("SELECT pg_backend_pid()")).scalar_one()
        stream = threading.Thread(target=lambda: answers.append(http.post(
            "/v1/personas:stream", json={"intent": "A lighthouse keeper who tells storm stories"},
            headers=member.auth).status_code))
        stream.start()
        try:
            wait_until(lambda: _blocked_by(engine, me), what="the stream's run waiting on the caller's membership")
        finally:
            erasing.rollback()
            stream.join()
    assert answers == [200]


def _broken(streaming: bool, output: str, **policy: object):
    """A service of one method declaring `policy`, in a pool of its own (the startup checks read descriptors)."""
    import pathlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    files = descriptor_pb2.FileDescriptorSet.FromString(
        (pathlib.Path(__file__).resolve().parents[3] / "gen" / "descriptor.binpb").read_bytes()).file
    wanted = ("google/protobuf/descriptor.proto", "google/protobuf/any.proto", "google/rpc/code.proto",
              "google/api/httpbody.proto", "persona/v1/options.proto")
    for file in sorted((f for f in files if f.name in wanted), key=lambda f: wanted.index(f.name)):
        pool.Add(file)
    broken = descriptor_pb2.FileDescriptorProto(name="broken.proto", package="broken", syntax="proto3",
                                                dependency=["persona/v1/options.proto", "google/api/httpbody.proto"])
    broken.message_type.add(name="Empty")
    method = broken.service.add(name="Broken").method.add(name="Go", input_type=".broken.Empty", output_type=output,
                                                          server_streaming=streaming)
    method.options.Extensions[options_pb2.policy].MergeFrom(options_pb2.MethodPolicy(**policy))
    pool.Add(broken)
    return pool.FindServiceByName("broken.Broken")


def test_a_read_declaring_its_own_member_order_is_a_startup_error():
    with pytest.raises(RuntimeError, match="orders its own member locks but is no write"):
        method_table([_broken(False, ".broken.Empty", own_member_order=True)])


def test_a_writing_download_is_a_startup_error():
    """A raw-body stream runs neither in Commit nor as a durable run, so nothing would hold its caller first."""
    raw = options_pb2.RESPONSE_KIND_RAW_BODY
    with pytest.raises(RuntimeError, match="is a download"):
        method_table([_broken(True, ".google.api.HttpBody", write=True, response=raw)])
    method_table([_broken(True, ".google.api.HttpBody", response=raw)])  # a download that writes nothing is fine
