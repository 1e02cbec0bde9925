from persona.v1 import orgs_pb2

from persona_service.kernel.api import RequestContext, ServicerDeps, timestamp
from persona_service.orgs.records import OrganizationRecord
from persona_service.orgs.service import OrgService


def organization(row: OrganizationRecord) -> orgs_pb2.Organization:
    return orgs_pb2.Organization(
        id=row.id, slug=row.slug, name=row.name, region=row.region,
        data_residency_locked=row.data_residency_locked, created_at=timestamp(row.created_at),
        owner_user_id=row.owner_user_id, workspaces_count=row.workspaces_count,
    )


class OrganizationServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetOrganization(self, request: orgs_pb2.GetOrganizationRequest,
                        ctx: RequestContext) -> orgs_pb2.Organization:
        return organization(OrgService(ctx.work).get(ctx.caller, request.id))
