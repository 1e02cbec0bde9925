from persona.v1 import chat_pb2, chat_pb2_grpc

from persona_service.domain.chat import ChatSessionService
from persona_service.transport.context import current
from persona_service.transport.convert import nullable_time, timestamp


def chat_session(row) -> chat_pb2.ChatSession:
    return chat_pb2.ChatSession(
        session_id=row["id"], org_id=row["org_id"], workspace_id=row["workspace_id"], persona_id=row["persona_id"],
        user_id=row["user_id"], title=row["title"], status=row["status"], message_count=row["message_count"],
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"], cost_usd_micros=row["cost_usd_micros"],
        started_at=timestamp(row["started_at"]), last_active_at=timestamp(row["last_active_at"]),
        ended_at=nullable_time(row["ended_at"]),
    )


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, app):
        self.app = app

    def GetChatSession(self, request, context):
        ctx = current()
        return chat_session(ChatSessionService(ctx.conn).get(ctx.principal, request.id))
