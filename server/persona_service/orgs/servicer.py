import grpc
from persona.v1 import orgs_pb2, orgs_pb2_grpc

from persona_service.kernel.api import ServicerDeps, context_of, timestamp
from persona_service.orgs.records import OrganizationRecord
from persona_service.orgs.service import OrgService


def organization(row: OrganizationRecord) -> orgs_pb2.Organization:
    return orgs_pb2.Organization(
        id=row.id, slug=row.slug, name=row.name, region=row.region,
        data_residency_locked=row.data_residency_locked, created_at=timestamp(row.created_at),
        owner_user_id=row.owner_user_id, workspaces_count=row.workspaces_count,
    )


class OrganizationServicer(orgs_pb2_grpc.OrganizationServiceServicer):
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetOrganization(self, request: orgs_pb2.GetOrganizationRequest,
                        context: grpc.ServicerContext) -> orgs_pb2.Organization:
        ctx = context_of(context)
        return organization(OrgService(ctx.conn).get(ctx.caller, request.id))
