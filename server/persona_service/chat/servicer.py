from collections.abc import Generator

from persona.v1 import chat_pb2

from persona_service.chat.controls import Change, ChatControls
from persona_service.chat.records import MessageRecord, MessageStarted, SessionFilters, SessionRecord
from persona_service.chat.service import ChatSessionService, Sampling, session_of
from persona_service.kernel.api import (
    ApiError,
    RequestContext,
    RunLost,
    ServicerDeps,
    drain,
    error_message,
    nullable_time,
    page_limit,
    timestamp,
)
from persona_service.providers.pricing import PriceTable


def chat_session(row: SessionRecord) -> chat_pb2.ChatSession:
    return chat_pb2.ChatSession(
        session_id=row.id, org_id=row.org_id, workspace_id=row.workspace_id, persona_id=row.persona_id,
        user_id=row.user_id, title=row.title, status=row.status, message_count=row.message_count,
        input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd_micros=row.cost_usd_micros,
        started_at=timestamp(row.started_at), last_active_at=timestamp(row.last_active_at),
        ended_at=nullable_time(row.ended_at), persona_version=row.persona_version or 0,
        unpriced_replies=row.unpriced_replies,
    )


def chat_message(row: MessageRecord) -> chat_pb2.ChatMessage:
    return chat_pb2.ChatMessage(
        id=row.id, session_id=row.session_id, role=row.role, content=row.content, ordinal=row.ordinal,
        model=row.model, drift_score=row.drift_score, recovered=row.recovered,
        usage=chat_pb2.ChatUsage(input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                                 cost_usd_micros=row.cost_usd_micros, unpriced=row.unpriced),
        created_at=timestamp(row.created_at), swipe_index=row.swipe_index, swipe_count=row.swipe_count,
        edited=row.edited,
    )


def sampling(request: chat_pb2.SendChatMessageRequest | chat_pb2.RegenerateChatMessageRequest
             | chat_pb2.PreviewChatMessageRequest) -> Sampling:
    return Sampling(
        temperature=request.temperature if request.HasField("temperature") else None,
        max_tokens=request.max_tokens if request.HasField("max_tokens") else None,
    )


def message_change(change: Change) -> chat_pb2.ChatMessageChange:
    return chat_pb2.ChatMessageChange(
        message=chat_message(change.message) if change.message is not None else None,
        session=chat_session(change.session), removed_count=change.removed,
    )


def _released(frames: list[bytes]) -> tuple[str, ...]:
    """The reply text an earlier attempt of the run streamed (its deltas), to go on from (kernel.transport.runs)."""
    events = [chat_pb2.ChatMessageEvent.FromString(frame) for frame in frames]
    if any(e.event not in ("message.started", "message.delta") for e in events):
        raise RunLost()  # its error was sent (its end goes out only once committed): nothing goes on after it
    return tuple(e.delta for e in events if e.event == "message.delta")


class ChatServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.prices = PriceTable.from_env()

    def _service(self, ctx: RequestContext, provider: bool = False) -> ChatSessionService:
        return ChatSessionService(
            ctx.work, self.deps.provider_for(ctx) if provider else None, cursors=self.deps.cursors, prices=self.prices,
        )

    def CreateChatSession(self, request: chat_pb2.CreateChatSessionRequest,
                          ctx: RequestContext) -> chat_pb2.ChatSession:
        row = self._service(ctx).create(ctx.caller, request.persona_id, request.user_id, request.title,
                                          persona_version=request.persona_version)
        return chat_session(row)

    def GetChatSession(self, request: chat_pb2.GetChatSessionRequest,
                       ctx: RequestContext) -> chat_pb2.ChatSession:
        return chat_session(session_of(ctx.caller, request.id, ctx.work))  # no connection on a hit

    def ListChatSessions(self, request: chat_pb2.ListChatSessionsRequest,
                         ctx: RequestContext) -> chat_pb2.ListChatSessionsResponse:
        filters = SessionFilters(persona_id=request.persona_id, status=request.status, user_id=request.user_id)
        rows, cursor = self._service(ctx).list(ctx.caller, filters, page_limit(request), request.cursor)
        return chat_pb2.ListChatSessionsResponse(items=[chat_session(r) for r in rows], next_cursor=cursor)

    def EndChatSession(self, request: chat_pb2.EndChatSessionRequest,
                       ctx: RequestContext) -> chat_pb2.ChatSession:
        return chat_session(self._service(ctx).end(ctx.caller, request.id))

    def ArchiveChatSession(self, request: chat_pb2.ArchiveChatSessionRequest,
                           ctx: RequestContext) -> chat_pb2.ChatSession:
        return chat_session(self._service(ctx).archive(ctx.caller, request.id))

    def SendChatMessage(self, request: chat_pb2.SendChatMessageRequest,
                        ctx: RequestContext) -> chat_pb2.SendChatMessageResponse:
        result = drain(self._service(ctx, provider=True).send(ctx.caller, request.id, request.content,
                                                              sampling(request)))
        return chat_pb2.SendChatMessageResponse(
            user_message=chat_message(result.user_message), reply=chat_message(result.reply),
            session=chat_session(result.session),
        )

    def StreamChatMessage(self, request: chat_pb2.SendChatMessageRequest, ctx: RequestContext
                          ) -> Generator[chat_pb2.ChatMessageEvent, None, chat_pb2.ChatMessageEvent]:
        operation = self._service(ctx, provider=True).send(ctx.caller, request.id, request.content, sampling(request),
                                                           stream=True, earlier=_released(ctx.run.earlier_frames()))
        started = False
        try:
            while True:
                try:
                    progress = next(operation)
                except StopIteration as done:
                    result = done.value  # the result frame: sent once the reply is committed
                    return chat_pb2.ChatMessageEvent(
                        event="message.completed", user_message=chat_message(result.user_message),
                        reply=chat_message(result.reply), session=chat_session(result.session),
                    )
                started = True
                if isinstance(progress, MessageStarted):
                    pending = chat_pb2.ChatMessage(session_id=request.id, role="user", content=request.content)
                    yield chat_pb2.ChatMessageEvent(event="message.started", user_message=pending)
                else:
                    yield chat_pb2.ChatMessageEvent(event="message.delta", delta=progress.text)
        except ApiError as err:
            # In-band once the stream has started: an HTTP/1.1 stream cannot
            # change its status any more. Before that, a plain error response.
            if started:
                yield chat_pb2.ChatMessageEvent(event="error", error=error_message(err))
            raise

    def ListChatMessages(self, request: chat_pb2.ListChatMessagesRequest,
                         ctx: RequestContext) -> chat_pb2.ListChatMessagesResponse:
        rows, cursor = self._service(ctx).messages(ctx.caller, request.id, page_limit(request), request.cursor)
        return chat_pb2.ListChatMessagesResponse(items=[chat_message(r) for r in rows], next_cursor=cursor)

    def RegenerateChatMessage(self, request: chat_pb2.RegenerateChatMessageRequest,
                              ctx: RequestContext) -> chat_pb2.SendChatMessageResponse:
        done = ChatControls(self._service(ctx, provider=True)).regenerate(
            ctx.caller, request.session_id, request.id, sampling(request))
        return chat_pb2.SendChatMessageResponse(
            user_message=chat_message(done.replied_to) if done.replied_to is not None else None,
            reply=chat_message(done.reply), session=chat_session(done.session),
        )

    def ChooseChatMessage(self, request: chat_pb2.ChooseChatMessageRequest,
                          ctx: RequestContext) -> chat_pb2.ChatMessage:
        return chat_message(ChatControls(self._service(ctx)).choose(
            ctx.caller, request.session_id, request.id, request.swipe_index))

    def UpdateChatMessage(self, request: chat_pb2.UpdateChatMessageRequest,
                          ctx: RequestContext) -> chat_pb2.ChatMessageChange:
        return message_change(ChatControls(self._service(ctx)).edit(
            ctx.caller, request.session_id, request.id, request.content))

    def DeleteChatMessage(self, request: chat_pb2.DeleteChatMessageRequest,
                          ctx: RequestContext) -> chat_pb2.ChatMessageChange:
        return message_change(ChatControls(self._service(ctx)).delete(ctx.caller, request.session_id, request.id))

    def PreviewChatMessage(self, request: chat_pb2.PreviewChatMessageRequest,
                           ctx: RequestContext) -> chat_pb2.ChatMessagePreview:
        sessions = self._service(ctx, provider=True)
        preview = ChatControls(sessions).preview(
            ctx.caller, request.id, request.content, sampling(request), str(getattr(sessions.provider, "model", "")),
            self.deps.limits(ctx.caller, ctx.work),
        )
        return chat_pb2.ChatMessagePreview(
            model=preview.model, input_tokens=preview.input_tokens, output_tokens=preview.output_tokens,
            cost_usd_micros=preview.cost_usd_micros, unpriced=preview.unpriced,
            quota=[chat_pb2.ChatQuotaUse(name=q.name, units=q.units, limit=q.limit, window_seconds=q.window_seconds)
                   for q in preview.quota],
        )
