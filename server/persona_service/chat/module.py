"""Chat sessions, the OpenAI-compatible surface (models, chat completions) and usage over time."""

import pathlib
from datetime import datetime

from persona.v1 import chat_pb2_grpc, openai_pb2_grpc, options_pb2, usage_pb2_grpc
from sqlalchemy import Connection

from persona_service.chat.completions import users_of
from persona_service.chat.openai_errors import OPENAI_STATUSES, openai_error_body
from persona_service.chat.openai_servicer import OpenAIServicer
from persona_service.chat.repository import ChatSessionRepository
from persona_service.chat.service import ACTION_KEY, THRESHOLD_KEY
from persona_service.chat.servicer import ChatServicer
from persona_service.chat.settings import ChatSettings
from persona_service.chat.usage_servicer import UsageServicer
from persona_service.kernel.api import (
    AGE_OUT_EVERY,
    ConfigKey,
    EndpointCap,
    Job,
    Module,
    Runtime,
    ServiceBinding,
)

_PERSONA_LEVELS = ("workspace", "org", "persona")


def _age_out(runtime: Runtime) -> int:
    """`chat.partitions`: the messages' months made ahead, and those past the retention dropped, then their sessions
    deleted in small batches (a partition holds the messages of the sessions started in its months: migration 0035).
    Meanwhile such a session reads with no messages, and a message to it answers 404 (docs/data-volume.md)."""
    from persona_service.kernel.api import age_out, load

    after, wait = "", False  # the round's batches go on by id from where the last one ended

    def expired(conn: Connection, before: datetime) -> int:
        nonlocal after, wait
        repo = ChatSessionRepository(conn)
        gone = repo.expire(before, after, wait=wait)
        if not gone and not wait:  # once more from the start for those a write held, waiting for it this time
            after, wait = "", True
            gone = repo.expire(before, after, wait=wait)
        after = gone[-1] if gone else after
        return len(gone)

    days = load(ChatSettings).retention_days
    return age_out(runtime.engine, "chat_messages", days, runtime.clock(), expired)


MODULE = Module(
    name="chat",
    migrations=pathlib.Path(__file__).with_name("migrations"),
    services=(
        ServiceBinding("persona.v1.ChatService", ChatServicer, chat_pb2_grpc.add_ChatServiceServicer_to_server),
        ServiceBinding("persona.v1.OpenAIService", OpenAIServicer, openai_pb2_grpc.add_OpenAIServiceServicer_to_server),
        ServiceBinding("persona.v1.UsageService", UsageServicer, usage_pb2_grpc.add_UsageServiceServicer_to_server),
    ),
    id_prefixes={"chat_session": "chs", "chat_message": "msg"},
    config_keys=(
        ConfigKey(ACTION_KEY, "enum", "block", allowed=("block", "auto_recover"), levels=_PERSONA_LEVELS),
        ConfigKey(THRESHOLD_KEY, "number", 0.35, minimum=0, maximum=1, levels=_PERSONA_LEVELS),
    ),
    endpoint_caps=(EndpointCap("chat.messages", 600, 60),),
    error_shapes={options_pb2.ERROR_SHAPE_OPENAI: openai_error_body},
    error_shape_statuses={options_pb2.ERROR_SHAPE_OPENAI: OPENAI_STATUSES},
    # The edge's own answers there (a body that is not JSON, a method the path does not take) too.
    error_shape_prefixes={path: options_pb2.ERROR_SHAPE_OPENAI
                          for path in ("/v1/chat/completions", "/v1/chat/completions:stream", "/v1/models", "/v1/models/")},
    # Their sessions and those of the credentials they asked for completions with (`users_of`).
    personal_data=lambda work, subject: work.of(ChatSessionRepository).personal_data(
        subject.org_id, users_of(work, subject)),
    erase_personal_data=lambda work, subject, now: work.of(ChatSessionRepository).erase(
        subject.org_id, users_of(work, subject)),
    settings=ChatSettings,
    jobs=(Job("chat.partitions", AGE_OUT_EVERY, _age_out),),
)
