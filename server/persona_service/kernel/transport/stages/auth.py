"""Authentication: who calls, from the `authorization` header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel.errors import Unauthorized
from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.stages.call import EDGE_MARK, LOG_CARRIER, Call, Stage

if TYPE_CHECKING:
    from persona_service.kernel.transport.auth import Authenticator
    from persona_service.kernel.transport.limits.limiter import RateLimiter


class Authenticate(Stage):
    def __init__(self, authenticator: Authenticator, limiter: RateLimiter) -> None:
        self.authenticator = authenticator
        self.limiter = limiter

    def __call__(self, call: Call) -> object:
        ctx = call.ctx
        try:
            principal = self.authenticator.authenticate(call.metadata.get("authorization"), lambda: unit_of_work(ctx).conn)
        except Unauthorized:
            # Failed credentials are limited per client address, and carry the headers too.
            ctx.headers += self.limiter.admit_anonymous(ctx.client_ip).headers
            raise
        ctx.principal = principal
        if EDGE_MARK in call.metadata:
            # Who called, for the edge's access log (the Lua filter keeps it there, never sends it on).
            ctx.headers.append((LOG_CARRIER, f"{principal.org_id} {principal.workspace_id} {principal.credential_id}"))
        return self.then(call)
