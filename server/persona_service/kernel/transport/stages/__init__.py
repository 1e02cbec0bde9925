"""The request pipeline's stages, in the order a method's call passes them
(`build`). The pipeline composes each method's list once, from its declared
policy: a method that declares no idempotency has no idempotency stage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from persona_service.kernel.transport.stages.auth import Authenticate
from persona_service.kernel.transport.stages.authorization import Authorize
from persona_service.kernel.transport.stages.call import Call, Next, Stage, compose
from persona_service.kernel.transport.stages.hold import HoldCaller
from persona_service.kernel.transport.stages.idempotency import Idempotency, StreamIdempotency
from persona_service.kernel.transport.stages.limits import AnonymousLimits, Limits, QueueAs
from persona_service.kernel.transport.stages.replica import ReplicaRouting
from persona_service.kernel.transport.stages.resume import Resume
from persona_service.kernel.transport.stages.validate import KnownFields, Validate

if TYPE_CHECKING:
    from persona_service.kernel.transport.fair import FairExecutor
    from persona_service.kernel.transport.host import PipelineHost
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.stages.commit import Commit

__all__ = ["Call", "Next", "Stage", "build", "compose"]

# The kinds of handler: a unary call, a server stream following a durable run, a raw byte stream (a download).
Kind = Literal["unary", "stream", "bytes"]


def build(app: PipelineHost, meta: MethodMeta, kind: Kind, executor: FairExecutor | None, commit: Commit) -> list[Stage]:
    """The stages of `meta`'s calls, in order. Request identity and client
    address make the call (pipeline._begin); outcome wraps them all."""
    policy = meta.policy
    stages: list[Stage]
    if policy.anonymous:  # the request proves itself (e.g. a signed URL); no tenant, no tenant limits
        stages = [AnonymousLimits(app.limiter), KnownFields(meta.path), Validate()]
        if kind == "stream":
            stages.append(Resume(app.runs))
    else:
        stages = [Authenticate(app.authenticator, app.limiter)]
        if executor is not None:
            stages.append(QueueAs(executor))
        stages += [Limits(app.limiter, app.limits, policy, stream=kind != "unary"), Authorize(policy),
                   KnownFields(meta.path)]
        if app.replicas is not None and (policy.write or policy.read_may_lag):
            stages.append(ReplicaRouting(app.replicas))
        if kind == "stream":
            stages.append(Resume(app.runs))
        stages.append(Validate())
        if policy.write and kind == "unary":
            stages.append(Idempotency(app.idempotency, meta))
        elif policy.write and kind == "stream":  # a replay follows the first request's run (a resume follows any)
            stages.append(StreamIdempotency(app.idempotency, app.runs, meta))
    if kind == "unary":
        stages.append(commit)
        if meta.holds_caller:  # the operation's first statement; a stream's run holds it itself (pipeline._produce)
            stages.append(HoldCaller(app.authenticator))
    return stages
