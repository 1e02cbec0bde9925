"""Capabilities the App hands servicers (kernel.resources.ServicerDeps), each a plain function over
only what its work uses, never over the App: what a function closes over is what its holder reaches
(tests/kernel/test_capabilities.py walks it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from persona_service.kernel.data.work import Work, connection_of
from persona_service.kernel.models import ModelCall
from persona_service.kernel.settings import load
from persona_service.kernel.transport import fair
from persona_service.kernel.transport.audit import AuditEntry, AuditLog
from persona_service.kernel.transport.limits.limiter import GENERATIONS, RateLimiter
from persona_service.kernel.transport.limits.resolver import LimitsResolver
from persona_service.providers.retrying import Retrying, failure_details
from persona_service.providers.settings import ProviderSettings

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from persona_service.kernel.models import Model, ProviderError
    from persona_service.kernel.principal import Principal
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.limits.plans import Limits, Quota


def audit_on(engine: Engine) -> Callable[[list[AuditEntry]], int]:
    """`audit(entries)`: audit rows written in a transaction of their own on `engine` (durable whatever the
    request's outcome); the number written."""

    def audit(entries: list[AuditEntry]) -> int:
        if entries:
            with engine.begin() as conn:
                audit_log = AuditLog(Work.on(conn))
                for entry in entries:
                    audit_log.record(entry)
        return len(entries)

    return audit


def model_call(ctx: RequestContext) -> ModelCall:
    """What `ctx`'s model calls are for, from the call itself: its caller's organization and plan weight, a turn
    of the process's gate for them, and the attempt of its durable run (a takeover's is the next, so a
    provider keyed by it sees the same number wherever the attempt runs)."""
    principal = ctx.principal
    if principal is None:
        return ModelCall(attempt=ctx.run.attempt)
    return ModelCall(org=principal.org_id, weight=fair.weight_of(principal.plan), attempt=ctx.run.attempt,
                     turn=fair.turn_of(principal))


def provider_for(provider: Model, delays: Sequence[float],
                 audit: Callable[[list[AuditEntry]], int]) -> Callable[[RequestContext], Retrying]:
    """`provider_for(ctx)`: the provider for one request, bound to its `model_call`, retried with `delays`,
    every failed upstream attempt written to the audit log under the caller (with the upstream's error
    envelope under `details`, which callers never see). The retry budget is read once, here, not per call."""
    budget = load(ProviderSettings).provider_retry_budget_seconds

    def for_call(ctx: RequestContext) -> Retrying:
        def audit_upstream(error: ProviderError, attempt: int, operation: str) -> None:
            entry = AuditEntry.for_principal(
                ctx.principal, action="provider.call", outcome="failure", status=error.spec.http_status,
                request_id=ctx.request_id, client_ip=ctx.client_ip, resource_type="provider",
                resource_id=error.provider, error_code=error.code,
                details=failure_details(error, attempt, operation),
            )
            audit([entry])

        return Retrying(provider, model_call(ctx), delays=delays, on_failure=audit_upstream, budget_seconds=budget)

    return for_call


def generations_used(limiter: RateLimiter, limits: LimitsResolver) -> Callable[[Principal, Work], int]:
    """`generations_used(caller, work)`: generations the caller's organization used of its monthly quota in
    its current period (the limiter's Redis counter, else what the call's unit of work reads drawn)."""

    def used(principal: Principal, work: Work) -> int:
        org_id, conn = principal.org_id, connection_of(work)
        return limiter.generations_used(org_id, limits.quota_period(org_id, conn),
                                        lambda: limits.drawn(org_id, GENERATIONS, conn))

    return used


def quota_of(limits: LimitsResolver) -> Callable[[Principal, str, Work], Quota]:
    """`quota(caller, Limits field, work)`: the caller's monthly quota, read in the call's unit of work."""
    quota = limits.quota

    def of(principal: Principal, name: str, work: Work) -> Quota:
        return quota(principal, name, connection_of(work))

    return of


def limits_of(limits: LimitsResolver) -> Callable[[Principal, Work], Limits]:
    """`limits(caller, work)`: the caller's organization's limits, an Enterprise's overrides read in the call's
    unit of work."""
    resolve = limits.limits

    def of(principal: Principal, work: Work) -> Limits:
        return resolve(principal, connection_of(work))

    return of
