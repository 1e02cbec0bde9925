"""HTTP health probes and metrics through the edge: `/healthz`, `/readyz`, `/metrics`."""

from persona.v1 import probes_pb2_grpc

from persona_service.kernel import metrics
from persona_service.kernel.module import Job, Module, ServiceBinding
from persona_service.probes.servicer import ProbeServicer
from persona_service.probes.settings import ProbeSettings

MODULE = Module(
    name="probes",
    services=(ServiceBinding("persona.v1.ProbeService", ProbeServicer, probes_pb2_grpc.add_ProbeServiceServicer_to_server),),
    settings=ProbeSettings,
    jobs=(Job("metrics.sample_pools", 5, lambda app: metrics.sample_pools(
        {"unary": app.engine, "stream": app.stream_engine})),),
)
