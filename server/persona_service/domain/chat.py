"""Chat sessions (read path; creation arrives with the chat feature)."""

from __future__ import annotations

from persona_service.domain.principal import Principal
from persona_service.errors import NotFound
from persona_service.repositories.chat import ChatSessionRepository


class ChatSessionService:
    def __init__(self, conn):
        self.repo = ChatSessionRepository(conn)

    def get(self, principal: Principal, session_id: str):
        row = self.repo.get(principal.workspace_id, session_id)
        if row is None:
            raise NotFound("chat session")
        return row
