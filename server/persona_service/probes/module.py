"""HTTP health probes through the edge: `/healthz` and `/readyz`."""

from persona.v1 import probes_pb2_grpc

from persona_service.kernel.module import Module, ServiceBinding
from persona_service.probes.servicer import ProbeServicer

MODULE = Module(
    name="probes",
    services=(ServiceBinding("persona.v1.ProbeService", ProbeServicer, probes_pb2_grpc.add_ProbeServiceServicer_to_server),),
)
