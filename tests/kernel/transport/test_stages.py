"""The request pipeline's stages (kernel/transport/stages/), each alone with a
fake call and `then`: no stack. The contract through Envoy (errors,
envelopes, idempotency, audit, streams) is held by the HTTP tests; these
hold each stage to its part, and the order to the declared one."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
import pytest
from google.protobuf import empty_pb2
from persona.v1 import options_pb2, personas_pb2
from persona_service.kernel.errors import (
    BadRequest,
    Forbidden,
    InternalError,
    NotFound,
    StoredError,
    Unauthorized,
    ValidationFailed,
)
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.context import RequestContext, unit_of_work
from persona_service.kernel.transport.fair import FairExecutor, weight_of
from persona_service.kernel.transport.idempotency import Claim, Replay
from persona_service.kernel.transport.limits.limiter import Admission
from persona_service.kernel.transport.policy import MethodMeta
from persona_service.kernel.transport.runs import ResumePoint
from persona_service.kernel.transport.stages import build, compose
from persona_service.kernel.transport.stages.auth import Authenticate
from persona_service.kernel.transport.stages.authorization import Authorize
from persona_service.kernel.transport.stages.call import EDGE_MARK, LOG_CARRIER, Call, Stage
from persona_service.kernel.transport.stages.client_address import ClientAddress
from persona_service.kernel.transport.stages.commit import STATUS_CARRIER, Commit
from persona_service.kernel.transport.stages.idempotency import Idempotency
from persona_service.kernel.transport.stages.identity import request_id
from persona_service.kernel.transport.stages.limits import AnonymousLimits, Limits, QueueAs
from persona_service.kernel.transport.stages.outcome import translate
from persona_service.kernel.transport.stages.resume import Following, Resume
from persona_service.kernel.transport.stages.validate import KnownFields, Undecodable, Validate
from sqlalchemy import exc as sa_exc

PATH = "/persona.v1.PersonaService/CreatePersona"
INTENT = "A grumpy lighthouse keeper who loves jazz"
PRINCIPAL = Principal("api_key", "key_1", "org_1", "ws_1", "usr_1", frozenset({"personas:write"}), "member", "pro",
                      False)
# Authentication before limits before authorization before validation before idempotency: refusals
# cost least first, and nothing is claimed or validated for a caller who may not call.
# The unary server's executor learns the caller's organization as soon as it is known (QueueAs).
# The operation's unit of work begins with the caller's membership held (HoldCaller), inside Commit: each run holds.
WRITE_ORDER = ["Authenticate", "QueueAs", "Limits", "Authorize", "KnownFields", "Validate", "Idempotency", "Commit",
               "HoldCaller"]


class FakeUow:
    def __init__(self) -> None:
        self.conn = object()
        self.events: list[str] = []

    def transaction_id(self) -> int | None:  # what settles a lost COMMIT (tests/kernel/transport/test_commit_in_doubt.py)
        return None

    def commit(self) -> None:
        self.events.append("commit")

    def close(self) -> None:
        self.events.append("close")


def meta(**policy: object) -> MethodMeta:
    return MethodMeta(PATH, options_pb2.MethodPolicy(**policy), "persona.create", "persona", empty_pb2.Empty)


def make_call(request: object = None, metadata: dict[str, str] | None = None, principal: Principal | None = PRINCIPAL,
              **policy: object) -> Call:
    ctx = RequestContext(request_id="req_1", method=PATH, uow=FakeUow(), client_ip="10.0.0.1",
                         principal=principal)
    if request is None:
        request = personas_pb2.CreatePersonaRequest(intent=INTENT)
    return Call(ctx, metadata or {}, meta(**policy), request, SimpleNamespace(is_active=lambda: True))


def then(call: Call) -> str:
    call.ctx.headers.append(("then", "called"))
    return "answered"


def called(call: Call) -> bool:
    return ("then", "called") in call.ctx.headers


def fake_app() -> SimpleNamespace:
    return SimpleNamespace(limiter=object(), authenticator=object(), limits=object(), runs=object(),
                           idempotency=object(), replicas=None)  # no replica configured: no routing stage


def run(stage, call: Call, operation=then):
    """The stage alone, handing on to `operation`."""
    return compose([stage], operation)(call)


def names(stages: list) -> list[str]:
    return [type(stage).__name__ for stage in stages]


# --- the order ------------------------------------------------------------------


def test_a_write_passes_the_stages_in_the_declared_order():
    commit = Commit(None, None, None)
    stages = build(fake_app(), meta(write=True, scope="personas:write"), "unary", object(), commit)
    assert names(stages) == WRITE_ORDER


def test_the_stages_are_built_from_the_declared_policy():
    app, commit = fake_app(), Commit(None, None, None)
    # A read declares no idempotency: it has no idempotency stage (no per-call branching on the hot read).
    assert names(build(app, meta(), "unary", None, commit)) == [
        "Authenticate", "Limits", "Authorize", "KnownFields", "Validate", "Commit"]
    # A stream resumes (its body unvalidated) instead of starting; its run commits its own outcome (and its
    # Idempotency-Key's claim, with the run's acceptance).
    assert names(build(app, meta(write=True), "stream", None, commit)) == [
        "Authenticate", "Limits", "Authorize", "KnownFields", "Resume", "Validate", "StreamIdempotency"]
    assert names(build(app, meta(write=True), "bytes", None, commit)) == [
        "Authenticate", "Limits", "Authorize", "KnownFields", "Validate"]
    assert names(build(app, meta(anonymous=True), "unary", None, commit)) == [
        "AnonymousLimits", "KnownFields", "Validate", "Commit"]
    # A write that orders its own member locks (the erasure, SCIM) is not held first.
    assert names(build(app, meta(write=True, own_member_order=True), "unary", None, commit))[-2:] == [
        "Idempotency", "Commit"]


def test_composed_stages_run_in_list_order_and_may_answer_without_going_on():
    ran: list[str] = []

    class Named(Stage):
        def __init__(self, name: str, answer: str | None = None) -> None:
            self.name, self.answer = name, answer

        def __call__(self, call: Call):
            ran.append(self.name)
            return self.answer if self.answer is not None else self.then(call)

    chain = compose([Named("a"), Named("b"), Named("c")], lambda call: ran.append("operation") or "done")
    assert chain(make_call()) == "done" and ran == ["a", "b", "c", "operation"]
    ran.clear()
    assert compose([Named("a"), Named("b", "replayed"), Named("c")], then)(make_call()) == "replayed"
    assert ran == ["a", "b"]
    # A stage in several chains (the unit of work's) goes on to each chain's own next link.
    shared = Named("shared")
    one, two = compose([shared], lambda call: "one"), compose([shared], lambda call: "two")
    assert one(make_call()) == "one" and two(make_call()) == "two"


# --- each stage -----------------------------------------------------------------


def test_authenticate_sets_the_principal_and_tells_the_edge_who_called():
    authenticator = SimpleNamespace(authenticate=lambda header, conn: PRINCIPAL if header == "Bearer k" else None)
    call = make_call(metadata={"authorization": "Bearer k", EDGE_MARK: "1"}, principal=None)
    assert run(Authenticate(authenticator, None), call) == "answered"
    assert call.ctx.principal == PRINCIPAL
    assert (LOG_CARRIER, "org_1 ws_1 key_1") in call.ctx.headers


def test_a_failed_authentication_is_limited_per_address_and_goes_no_further():
    def refuse(header, conn):
        raise Unauthorized("no")

    limiter = SimpleNamespace(admit_anonymous=lambda ip: Admission([("x-ratelimit-limit", ip)]))
    call = make_call(principal=None)
    with pytest.raises(Unauthorized):
        run(Authenticate(SimpleNamespace(authenticate=refuse), limiter), call)
    assert call.ctx.headers == [("x-ratelimit-limit", "10.0.0.1")] and not called(call)


def test_limits_admit_the_organization_for_the_declared_cap_with_a_quota_only_when_generating():
    asked: list[dict] = []
    limiter = SimpleNamespace(admit=lambda org, limits, **kw: asked.append({"org": org, **kw}) or Admission([("a", "1")]))
    resolver = SimpleNamespace(limits=lambda principal, conn: "pro", quota_period=lambda org, conn: (1, 2))
    call = make_call()
    policy = options_pb2.MethodPolicy(endpoint_cap="create", generation=True)
    run(Limits(limiter, resolver, policy, stream=True), call)
    assert callable(asked[0].pop("drawn"))  # what rebuilds a counter Redis lost (the quota's draws so far)
    assert asked == [{"org": "org_1", "cap": "create", "generation": True, "stream": True, "token": "req_1",
                      "period": (1, 2)}]
    assert call.admission.headers == [("a", "1")] and ("a", "1") in call.ctx.headers and called(call)
    run(Limits(limiter, resolver, options_pb2.MethodPolicy(), stream=False), make_call())
    assert asked[-1]["period"] is None and asked[-1]["stream"] is False


def test_anonymous_limits_only_report_the_address_headers():
    call = make_call(principal=None)
    run(AnonymousLimits(SimpleNamespace(peek_anonymous=lambda ip: Admission([("ratelimit", ip)]))), call)
    assert call.ctx.headers[0] == ("ratelimit", "10.0.0.1") and called(call)


def test_authorize_refuses_a_credential_without_the_declared_scope():
    run(Authorize(options_pb2.MethodPolicy(scope="personas:write")), call := make_call())
    assert called(call)
    call = make_call()
    with pytest.raises(Forbidden):
        run(Authorize(options_pb2.MethodPolicy(scope="billing:write")), call)
    assert not called(call)


def test_an_authenticated_callers_later_calls_queue_as_its_organization_at_the_unary_executor():
    executor = FairExecutor(1, "rpc-test")
    arriving = (("authorization", "Bearer key"),)
    assert executor.tenant(arriving) == ("", 1)  # not yet known: the queue of unknown credentials
    call = make_call(metadata={"authorization": "Bearer key"})
    run(QueueAs(executor), call)
    assert called(call) and executor.tenant(arriving) == ("org_1", weight_of("pro"))
    assert executor.tenant((("authorization", "Bearer another"),)) == ("", 1)
    executor.shutdown()


def test_known_fields_refuse_an_undecodable_body():
    call = make_call(request=Undecodable())
    with pytest.raises(BadRequest) as refused:
        run(KnownFields(PATH), call)
    assert refused.value.details == {"reason": "undecodable"} and not called(call)
    run(KnownFields(PATH), call := make_call())
    assert called(call)


def test_validate_applies_the_request_rules():
    call = make_call(request=personas_pb2.CreatePersonaRequest(intent="nul \x00 here"))
    with pytest.raises(ValidationFailed):
        run(Validate(), call)
    assert not called(call)


def test_idempotency_claims_a_key_and_replays_a_stored_outcome_without_the_operation():
    begun: list[tuple] = []
    stored: dict[str, Replay | None] = {"k1": None, "k2": Replay(b"", None, None, {"etag": "1"}),
                                       "k3": Replay(None, 404, '{"error": {"code": "not_found", "message": "gone"}}', {})}

    def begin(principal, key, path, digest):
        begun.append((key, path))
        return Claim("org_1", key), stored[key]

    stage = Idempotency(SimpleNamespace(begin=begin), meta(write=True))
    assert run(stage, call := make_call()) == "answered" and not begun and call.claim is None  # no key
    assert run(stage, call := make_call(metadata={"idempotency-key": "k1"})) == "answered"
    assert call.claim == Claim("org_1", "k1") and begun == [("k1", PATH)]
    replayed = run(stage, call := make_call(metadata={"idempotency-key": "k2"}))
    assert replayed == empty_pb2.Empty() and not called(call)
    assert ("idempotent-replayed", "true") in call.ctx.headers and ("etag", "1") in call.ctx.headers
    with pytest.raises(StoredError):
        run(stage, call := make_call(metadata={"idempotency-key": "k3"}))
    assert not called(call)


def test_resume_follows_the_named_run_instead_of_going_on():
    resumed: list[tuple] = []
    runs = SimpleNamespace(resume=lambda point, owner, path, active: resumed.append((point, owner, path)) or (
        iter([]), lambda: None))
    assert run(Resume(runs), call := make_call()) == "answered"
    call = make_call()
    call.resume = ResumePoint("run_1", 3)
    following = run(Resume(runs), call)
    assert isinstance(following, Following) and following.run is None and following.run_id == "run_1"
    assert resumed[0][1].org_id == "org_1" and resumed[0][2] == PATH
    assert not called(call) and unit_of_work(call.ctx).events == ["close"]  # following needs no database


def test_commit_runs_the_operation_then_commits_and_answers_with_the_declared_status():
    hooks: list[str] = []
    call = make_call(success_status=201)
    call.ctx.after_commit.append(lambda: hooks.append("hook"))
    response = run(Commit(None, None, None), call, lambda call: empty_pb2.Empty())
    assert response == empty_pb2.Empty() and call.reached_operation and call.succeeded
    assert unit_of_work(call.ctx).events == ["commit"] and hooks == ["hook"]
    assert (STATUS_CARRIER, "201") in call.ctx.headers


def test_a_failing_operation_commits_nothing():
    def fails(call):
        raise NotFound("gone")

    call = make_call()
    with pytest.raises(NotFound):
        run(Commit(None, None, None), call, fails)
    assert call.reached_operation and not call.succeeded and unit_of_work(call.ctx).events == []


def _aborted(sqlstate_error: type) -> Exception:
    return sa_exc.OperationalError("SELECT 1", {}, sqlstate_error("aborted"))


def test_an_operation_postgresql_aborted_runs_again_from_the_answer_it_started_with():
    attempts: list[int] = []

    def deadlocks_once(call):
        attempts.append(len(attempts))
        call.ctx.headers.append(("x-attempt", str(len(attempts))))
        call.ctx.respond(202, Etag=f"v{len(attempts)}")
        call.ctx.after_commit.append(lambda: None)
        if len(attempts) == 1:
            raise _aborted(psycopg.errors.DeadlockDetected)
        return empty_pb2.Empty()

    call = make_call()
    call.ctx.headers.append(("x-limit", "before"))
    run(Commit(None, None, None), call, deadlocks_once)
    assert len(attempts) == 2 and call.succeeded and unit_of_work(call.ctx).events == ["close", "commit"]
    assert [h for h in call.ctx.headers if h[0] in ("x-limit", "x-attempt")] == [("x-limit", "before"),
                                                                                  ("x-attempt", "2")]
    assert call.ctx.http_headers == [("etag", "v2")] and len(call.ctx.after_commit) == 1


def test_an_operations_own_failure_runs_once():
    attempts: list[int] = []

    def fails(call):
        attempts.append(1)
        raise _aborted(psycopg.errors.LockNotAvailable)  # not an abort PostgreSQL made to let others go on

    with pytest.raises(sa_exc.OperationalError):
        run(Commit(None, None, None), make_call(), fails)
    assert attempts == [1]


def test_outcome_translates_an_unexpected_error_into_a_500_that_leaks_nothing():
    ctx = make_call().ctx
    assert isinstance(translate(ctx, KeyError("secret")), InternalError)
    err = NotFound("gone")
    assert translate(ctx, err) is err


def test_request_identity_keeps_a_well_formed_id_and_replaces_any_other():
    assert request_id({"x-request-id": "abc-123"}) == "abc-123"
    made = request_id({"x-request-id": "bad id\n"})
    assert made != "bad id\n" and len(made) == 36


def test_the_edge_address_counts_only_from_a_trusted_peer_proving_the_secret():
    trust = ClientAddress(["10.0.0.0/8"], "s3cret")
    edge = {"x-envoy-client-address": "203.0.113.7:5555", "x-persona-edge-secret": "s3cret"}
    assert trust("ipv4:10.1.2.3:40000", edge) == "203.0.113.7"
    assert trust("ipv4:192.0.2.1:40000", edge) == "192.0.2.1"  # not a trusted peer
    assert trust("ipv4:10.1.2.3:40000", {**edge, "x-persona-edge-secret": "guess"}) == "10.1.2.3"
    assert trust("ipv6:[::1]:40000", {}) == "::1"
