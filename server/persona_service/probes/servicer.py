from __future__ import annotations

import hmac

from google.api import httpbody_pb2
from persona.v1 import probes_pb2, probes_pb2_grpc

from persona_service.kernel import metrics
from persona_service.kernel.errors import ServiceUnavailable, Unauthorized
from persona_service.kernel.settings import load
from persona_service.probes.checks import readiness
from persona_service.probes.settings import ProbeSettings


class ProbeServicer(probes_pb2_grpc.ProbeServiceServicer):
    def __init__(self, app):
        self.app = app

    def GetLiveness(self, request, context):
        return probes_pb2.ProbeResult(status="ok")

    def GetMetrics(self, request, context):
        token = load(ProbeSettings).metrics_token
        if token:
            sent = dict(context.invocation_metadata()).get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
                raise Unauthorized("The metrics endpoint needs its bearer token (PERSONA_METRICS_TOKEN).")
        body, content_type = metrics.exposition()
        return httpbody_pb2.HttpBody(content_type=content_type, data=body)

    def GetReadiness(self, request, context):
        checks = readiness(self.app.engine, self.app.redis, [str(d) for d in self.app.modules.migrations])
        failed = {c.name: c.detail for c in checks if not c.ok}
        if failed:
            raise ServiceUnavailable("Not ready.", {"checks": failed})
        return probes_pb2.ProbeResult(status="ok", checks=[
            probes_pb2.ProbeCheck(name=c.name, ok=c.ok, detail=c.detail) for c in checks])
