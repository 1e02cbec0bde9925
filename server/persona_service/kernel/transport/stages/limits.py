"""Limits and admission: rate limits and quotas (per organization; per
client address for anonymous calls), then a fair turn at the unary server's
workers (organizations take turns by plan; refusals take no turn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persona_service.kernel.errors import ServiceUnavailable
from persona_service.kernel.fair import GateTimeout, weight_of
from persona_service.kernel.transport.outages import RETRY_AFTER_SECONDS
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona.v1.options_pb2 import MethodPolicy

    from persona_service.kernel.fair import FairGate
    from persona_service.kernel.limits.limiter import RateLimiter
    from persona_service.kernel.limits.resolver import LimitsResolver

# How long an admitted unary call waits for a worker's turn before a 503 with Retry-After.
TURN_WAIT_SECONDS = 10.0


class Limits(Stage):
    """The organization's limits, for the method's declared cap (and quota when it generates)."""

    def __init__(self, limiter: RateLimiter, limits: LimitsResolver, policy: MethodPolicy, stream: bool) -> None:
        self.limiter = limiter
        self.limits = limits
        self.policy = policy
        self.stream = stream

    def __call__(self, call: Call) -> Any:
        ctx, policy = call.ctx, self.policy
        principal = ctx.caller
        call.admission = self.limiter.admit(
            principal.org_id, self.limits.limits(principal, lambda: ctx.conn), cap=policy.endpoint_cap,
            generation=policy.generation, stream=self.stream, token=ctx.request_id,
            period=self.limits.quota_period(principal.org_id, lambda: ctx.conn) if policy.generation else None,
        )
        ctx.headers += call.admission.headers
        return self.then(call)


class AnonymousLimits(Stage):
    """An anonymous method (the request proves itself, e.g. a signed URL):
    no tenant, no tenant limits; the client address's headers only."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def __call__(self, call: Call) -> Any:
        call.ctx.headers += self.limiter.peek_anonymous(call.ctx.client_ip).headers
        return self.then(call)


class FairTurn(Stage):
    """A turn at the unary server's workers, released when the call ends."""

    def __init__(self, gate: FairGate) -> None:
        self.gate = gate

    def __call__(self, call: Call) -> Any:
        principal = call.ctx.caller
        call.ctx.uow.close()  # what authentication read on a cache miss: no connection is held while waiting
        try:
            self.gate.acquire(principal.org_id, weight_of(principal.plan), TURN_WAIT_SECONDS)
        except GateTimeout:
            err = ServiceUnavailable("The server is busy; retry shortly.", {"retryAfter": RETRY_AFTER_SECONDS})
            err.headers = {"retry-after": str(RETRY_AFTER_SECONDS)}
            raise err from None
        call.holds_turn = True
        return self.then(call)
