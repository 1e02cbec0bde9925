"""HTTP health probes and metrics through the edge: `/healthz`, `/readyz`, `/metrics`."""

from persona.v1 import probes_pb2_grpc

from persona_service.kernel.api import Module, ServiceBinding
from persona_service.probes.servicer import ProbeServicer
from persona_service.probes.settings import ProbeSettings

MODULE = Module(
    name="probes",
    services=(ServiceBinding("persona.v1.ProbeService", ProbeServicer, probes_pb2_grpc.add_ProbeServiceServicer_to_server),),
    settings=ProbeSettings,
)
