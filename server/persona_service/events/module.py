"""Read APIs over the kernel's event outbox and audit log."""

from persona.v1 import audit_pb2_grpc, events_pb2_grpc

from persona_service.events.audit_servicer import AuditServicer
from persona_service.events.servicer import EventServicer
from persona_service.kernel.api import Module, ServiceBinding

MODULE = Module(
    name="events",
    services=(
        ServiceBinding("persona.v1.EventService", EventServicer, events_pb2_grpc.add_EventServiceServicer_to_server),
        ServiceBinding("persona.v1.AuditService", AuditServicer, audit_pb2_grpc.add_AuditServiceServicer_to_server),
    ),
)
