"""gRPC servicers: proto in, domain call, proto out. No SQL, no rules."""

from persona.v1 import (
    admin_pb2_grpc,
    audit_pb2_grpc,
    chat_pb2_grpc,
    config_pb2_grpc,
    events_pb2_grpc,
    keys_pb2_grpc,
    openai_pb2_grpc,
    orgs_pb2_grpc,
    personas_pb2_grpc,
    webhooks_pb2_grpc,
)

from persona_service.transport.servicers.admin import AdminServicer
from persona_service.transport.servicers.audit import AuditServicer
from persona_service.transport.servicers.chat import ChatServicer
from persona_service.transport.servicers.config import ConfigServicer
from persona_service.transport.servicers.events import EventServicer
from persona_service.transport.servicers.keys import ApiKeyServicer
from persona_service.transport.servicers.openai import OpenAIServicer
from persona_service.transport.servicers.orgs import OrganizationServicer
from persona_service.transport.servicers.personas import PersonaServicer
from persona_service.transport.servicers.webhooks import WebhookServicer

# (servicer class, registration function, full service name)
SERVICERS = [
    (OrganizationServicer, orgs_pb2_grpc.add_OrganizationServiceServicer_to_server, "persona.v1.OrganizationService"),
    (ApiKeyServicer, keys_pb2_grpc.add_ApiKeyServiceServicer_to_server, "persona.v1.ApiKeyService"),
    (ChatServicer, chat_pb2_grpc.add_ChatServiceServicer_to_server, "persona.v1.ChatService"),
    (AdminServicer, admin_pb2_grpc.add_AdminServiceServicer_to_server, "persona.v1.AdminService"),
    (ConfigServicer, config_pb2_grpc.add_ConfigServiceServicer_to_server, "persona.v1.ConfigService"),
    (AuditServicer, audit_pb2_grpc.add_AuditServiceServicer_to_server, "persona.v1.AuditService"),
    (PersonaServicer, personas_pb2_grpc.add_PersonaServiceServicer_to_server, "persona.v1.PersonaService"),
    (EventServicer, events_pb2_grpc.add_EventServiceServicer_to_server, "persona.v1.EventService"),
    (OpenAIServicer, openai_pb2_grpc.add_OpenAIServiceServicer_to_server, "persona.v1.OpenAIService"),
    (WebhookServicer, webhooks_pb2_grpc.add_WebhookServiceServicer_to_server, "persona.v1.WebhookService"),
]
SERVICE_NAMES = [name for _, _, name in SERVICERS]
