from __future__ import annotations

import hmac

from google.api import httpbody_pb2
from persona.v1 import probes_pb2

from persona_service.kernel.api import (
    RequestContext,
    ServicerDeps,
    ServiceUnavailable,
    Unauthorized,
    load,
    metrics_exposition,
)
from persona_service.probes.settings import ProbeSettings


class ProbeServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.metrics_token = load(ProbeSettings).metrics_token

    def GetLiveness(self, request: probes_pb2.GetLivenessRequest,
                    ctx: RequestContext) -> probes_pb2.ProbeResult:
        return probes_pb2.ProbeResult(status="ok")

    def GetMetrics(self, request: probes_pb2.GetMetricsRequest, ctx: RequestContext) -> httpbody_pb2.HttpBody:
        token = self.metrics_token
        if token:
            sent = ctx.metadata.get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                raise Unauthorized("The metrics endpoint needs its bearer token (PERSONA_METRICS_TOKEN).")
        body, content_type = metrics_exposition()
        return httpbody_pb2.HttpBody(content_type=content_type, data=body)

    def GetReadiness(self, request: probes_pb2.GetReadinessRequest,
                     ctx: RequestContext) -> probes_pb2.ProbeResult:
        checks = self.deps.readiness()
        failed = {c.name: c.detail for c in checks if not c.ok}
        if self.deps.draining():  # leaving rotation before it stops (kernel/server.drain)
            failed["draining"] = "this process is shutting down"
        if failed:
            raise ServiceUnavailable("Not ready.", {"checks": failed})
        return probes_pb2.ProbeResult(status="ok", checks=[
            probes_pb2.ProbeCheck(name=c.name, ok=c.ok, detail=c.detail) for c in checks])
