"""Authorization: the key's IP allowlist, then the method's declared policy (scope, roles, platform admin)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_service.kernel.transport.access import authorize
from persona_service.kernel.transport.auth import check_client_address
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona.v1.options_pb2 import MethodPolicy


class Authorize(Stage):
    def __init__(self, policy: MethodPolicy) -> None:
        self.policy = policy

    def __call__(self, call: Call) -> object:
        principal, policy = call.ctx.caller, self.policy
        check_client_address(principal, call.ctx.client_ip)
        authorize(principal, scope=policy.scope, roles=policy.roles, platform_admin=policy.platform_admin)
        return self.then(call)
