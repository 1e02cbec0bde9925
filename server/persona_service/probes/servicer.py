from __future__ import annotations

from persona.v1 import probes_pb2, probes_pb2_grpc

from persona_service.kernel.errors import ServiceUnavailable
from persona_service.probes.checks import readiness


class ProbeServicer(probes_pb2_grpc.ProbeServiceServicer):
    def __init__(self, app):
        self.app = app

    def GetLiveness(self, request, context):
        return probes_pb2.ProbeResult(status="ok")

    def GetReadiness(self, request, context):
        checks = readiness(self.app.engine, self.app.redis, [str(d) for d in self.app.modules.migrations])
        failed = {c.name: c.detail for c in checks if not c.ok}
        if failed:
            raise ServiceUnavailable("Not ready.", {"checks": failed})
        return probes_pb2.ProbeResult(status="ok", checks=[
            probes_pb2.ProbeCheck(name=c.name, ok=c.ok, detail=c.detail) for c in checks])
