from persona.v1 import events_pb2, events_pb2_grpc

from persona_service.kernel.outbox import Outbox
from persona_service.kernel.outbox_repository import EventRecord
from persona_service.kernel.transport.context import current
from persona_service.kernel.transport.convert import struct, timestamp


def event(row: EventRecord) -> events_pb2.Event:
    return events_pb2.Event(
        id=row.id, type=row.type, occurred_at=timestamp(row.occurred_at), org_id=row.org_id,
        workspace_id=row.workspace_id, data=struct(row.data),
    )


class EventServicer(events_pb2_grpc.EventServiceServicer):
    def __init__(self, app):
        self.app = app

    def ListEvents(self, request, context):
        ctx = current()
        rows, token = Outbox(ctx.conn, self.app.cursors).list(
            ctx.caller, request.type, request.persona_id, request.page_size, request.page_token
        )
        return events_pb2.ListEventsResponse(events=[event(r) for r in rows], next_page_token=token)

    def GetEvent(self, request, context):
        ctx = current()
        return event(Outbox(ctx.conn).get(ctx.caller, request.id))
