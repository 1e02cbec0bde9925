"""Limits and admission: rate limits and quotas (per organization; per
client address for anonymous calls), and the organization a credential's
later calls queue as at the unary server's executor (kernel.transport.fair)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.fair import weight_of
from persona_service.kernel.transport.limits.limiter import GENERATIONS
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona.v1.options_pb2 import MethodPolicy

    from persona_service.kernel.transport.fair import FairExecutor
    from persona_service.kernel.transport.limits.limiter import RateLimiter
    from persona_service.kernel.transport.limits.resolver import LimitsResolver


class Limits(Stage):
    """The organization's limits, for the method's declared cap (and quota when it generates)."""

    def __init__(self, limiter: RateLimiter, limits: LimitsResolver, policy: MethodPolicy, stream: bool) -> None:
        self.limiter = limiter
        self.limits = limits
        self.policy = policy
        self.stream = stream

    def __call__(self, call: Call) -> object:
        ctx, policy = call.ctx, self.policy
        principal = ctx.caller
        call.admission = self.limiter.admit(
            principal.org_id, self.limits.limits(principal, lambda: unit_of_work(ctx).conn), cap=policy.endpoint_cap,
            generation=policy.generation, stream=self.stream, token=ctx.request_id,
            period=self.limits.quota_period(principal.org_id, lambda: unit_of_work(ctx).conn) if policy.generation else None,
            drawn=lambda: self.limits.drawn(principal.org_id, GENERATIONS, lambda: unit_of_work(ctx).conn),
        )
        ctx.headers += call.admission.headers
        return self.then(call)


class AnonymousLimits(Stage):
    """An anonymous method (the request proves itself, e.g. a signed URL):
    no tenant, no tenant limits; the client address's headers only."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def __call__(self, call: Call) -> object:
        call.ctx.headers += self.limiter.peek_anonymous(call.ctx.client_ip).headers
        return self.then(call)


class QueueAs(Stage):
    """Tells the unary server's executor which organization (and plan weight)
    the caller's credential belongs to, so its later calls wait for a worker
    in that organization's queue (taken in turns by plan) from their arrival:
    a call then waits as a queued function, not on a thread of its own."""

    def __init__(self, executor: FairExecutor) -> None:
        self.executor = executor

    def __call__(self, call: Call) -> object:
        principal = call.ctx.caller
        self.executor.learn(call.metadata.get("authorization"), principal.org_id, weight_of(principal.plan))
        return self.then(call)
