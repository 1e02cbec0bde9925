"""Once the caller is known: a read declared `read_may_lag` opens on the replica where it may, and a write
leaves its organization's read-your-writes mark (kernel.data.replicas). Only with a replica configured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel.transport.context import reroute, unit_of_work
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona_service.kernel.data.replicas import ReplicaRouter


class ReplicaRouting(Stage):
    def __init__(self, router: ReplicaRouter) -> None:
        self.router = router

    def __call__(self, call: Call) -> object:
        route(self.router, call)
        return self.then(call)


def route(router: ReplicaRouter | None, call: Call) -> None:
    """The call's unit of work as the replica needs it (a run revived elsewhere passes no stage: it calls this)."""
    if router is not None and call.ctx.principal is not None:
        policy = call.meta.policy
        reroute(call.ctx, router.routed(unit_of_work(call.ctx), policy.write, policy.read_may_lag, call.ctx.principal.org_id))
