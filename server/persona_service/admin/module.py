"""Platform-admin operations (webhook secret rotation, DSAR build)."""

from persona.v1 import admin_pb2_grpc

from persona_service.admin.servicer import AdminServicer
from persona_service.kernel.api import Module, Need, ServiceBinding

MODULE = Module(
    name="admin",
    services=(ServiceBinding("persona.v1.AdminService", AdminServicer, admin_pb2_grpc.add_AdminServiceServicer_to_server),),
    needs=frozenset({Need.PERSONAL_DATA}),  # the DSAR build entry point builds from every module's part
)
