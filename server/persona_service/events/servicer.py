from persona.v1 import events_pb2

from persona_service.kernel.api import EventRecord, Outbox, RequestContext, ServicerDeps, page_limit, struct, timestamp


def event(row: EventRecord) -> events_pb2.Event:
    return events_pb2.Event(
        id=row.id, type=row.type, occurred_at=timestamp(row.occurred_at), org_id=row.org_id,
        workspace_id=row.workspace_id, data=struct(row.data),
    )


class EventServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def ListEvents(self, request: events_pb2.ListEventsRequest,
                   ctx: RequestContext) -> events_pb2.ListEventsResponse:
        rows, cursor = Outbox(ctx.work, self.deps.cursors).list(
            ctx.caller, request.type, request.persona_id, page_limit(request), request.cursor
        )
        return events_pb2.ListEventsResponse(items=[event(r) for r in rows], next_cursor=cursor)

    def GetEvent(self, request: events_pb2.GetEventRequest, ctx: RequestContext) -> events_pb2.Event:
        return event(Outbox(ctx.work).get(ctx.caller, request.id))
