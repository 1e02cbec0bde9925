"""The web console at `/dashboard`: a page and its assets, served as raw
bodies through the edge; the browser calls only the public /v1 API."""

from persona.v1 import dashboard_pb2_grpc

from persona_service.dashboard.servicer import DashboardServicer
from persona_service.kernel.api import Module, ServiceBinding

MODULE = Module(
    name="dashboard",
    services=(ServiceBinding("persona.v1.DashboardService", DashboardServicer,
                             dashboard_pb2_grpc.add_DashboardServiceServicer_to_server),),
)
