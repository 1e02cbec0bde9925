"""Organizations, workspaces, users, memberships and API keys; the kernel's credential store."""

from persona.v1 import keys_pb2_grpc, orgs_pb2_grpc

from persona_service.kernel.api import Module, ServiceBinding
from persona_service.orgs.commands import COMMANDS
from persona_service.orgs.credentials import OrgCredentialStore
from persona_service.orgs.keys import SCIM_SCOPE
from persona_service.orgs.keys_servicer import ApiKeyServicer
from persona_service.orgs.repository import OrgRepository
from persona_service.orgs.servicer import OrganizationServicer

MODULE = Module(
    name="orgs",
    services=(
        ServiceBinding("persona.v1.OrganizationService", OrganizationServicer,
                       orgs_pb2_grpc.add_OrganizationServiceServicer_to_server),
        ServiceBinding("persona.v1.ApiKeyService", ApiKeyServicer, keys_pb2_grpc.add_ApiKeyServiceServicer_to_server),
    ),
    id_prefixes={"org": "org", "workspace": "ws", "user": "usr", "api_key": "key"},
    commands=COMMANDS,
    scopes=(SCIM_SCOPE,),
    credentials=OrgCredentialStore,
    personal_data=lambda work, subject: work.of(OrgRepository).personal_data(subject.org_id, subject.user_id),
    erase_personal_data=lambda work, subject, now: work.of(OrgRepository).erase_member(
        subject.org_id, subject.user_id, now),
)
