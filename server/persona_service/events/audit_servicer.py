from persona.v1 import audit_pb2

from persona_service.kernel.api import (
    AuditLog,
    AuditRecord,
    RequestContext,
    ServicerDeps,
    page_limit,
    struct,
    timestamp,
)


def audit_event(row: AuditRecord) -> audit_pb2.AuditEvent:
    return audit_pb2.AuditEvent(
        id=row.id, occurred_at=timestamp(row.occurred_at), org_id=row.org_id or "",
        workspace_id=row.workspace_id or "", actor_user_id=row.actor_user_id or "",
        credential_id=row.credential_id or "", action=row.action, resource_type=row.resource_type,
        resource_id=row.resource_id, outcome=row.outcome, status=row.status, error_code=row.error_code,
        request_id=row.request_id, client_ip=row.client_ip, details=struct(row.details),
    )


class AuditServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def ListAuditEvents(self, request: audit_pb2.ListAuditEventsRequest,
                        ctx: RequestContext) -> audit_pb2.ListAuditEventsResponse:
        filters = {
            name: getattr(request, name)
            for name in ("action", "outcome", "actor_user_id", "credential_id", "resource_type", "resource_id", "request_id")
        }
        rows, cursor = AuditLog(ctx.work, self.deps.cursors).list(ctx.caller, filters, page_limit(request), request.cursor)
        return audit_pb2.ListAuditEventsResponse(items=[audit_event(r) for r in rows], next_cursor=cursor)
