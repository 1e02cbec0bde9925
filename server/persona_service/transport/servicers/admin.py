from persona.v1 import admin_pb2, admin_pb2_grpc

from persona_service.domain.admin import DsarBuilder


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    def __init__(self, app):
        self.app = app

    def BuildOneDsarExport(self, request, context):
        result = DsarBuilder().build_one()
        return admin_pb2.BuildOneDsarExportResponse(handled=result is not None, job_id=result or "")
