"""The Python SDK's AsyncPersonaClient against the real stack through Envoy (calls, typed
errors, retries with one idempotency key, pagination, a chat stream resumed after a cut), the
one server-sent event parser both clients use, and the answer models (snake_case attributes,
tolerance of what a newer server sends, params TypedDicts on the wire)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest
from persona_sdk import APIConnectionError, AsyncPersonaClient, NotFoundError, SSEDecoder, ValidationFailedError
from persona_sdk._models import parse, to_wire
from persona_sdk._params import PARAMS
from persona_sdk.types import ChatMessageEvent, ChatSession, Persona

BACKOFF = 0.05


class AsyncWire(httpx.AsyncBaseTransport):
    """The real async transport, recording every request; `cut_next_stream(n)` breaks the next
    event stream (a read error) after its n-th frame, half-way through the next one."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []
        self._cut: int | None = None

    def cut_next_stream(self, frames: int) -> None:
        self._cut = frames

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = await self._inner.handle_async_request(request)
        if self._cut is not None and response.headers.get("content-type", "").startswith("text/event-stream"):
            frames, self._cut = self._cut, None
            return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                  stream=_CutStream(response.stream, frames))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CutStream(httpx.AsyncByteStream):
    def __init__(self, inner, frames: int) -> None:
        self._inner, self._frames = inner, frames

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buffer, sent = b"", 0
        async for chunk in self._inner:
            buffer += chunk
            while sent < self._frames and b"\n\n" in buffer:
                frame, _, buffer = buffer.partition(b"\n\n")
                yield frame + b"\n\n"
                sent += 1
            if sent == self._frames:
                nxt = buffer.partition(b"\n\n")[0]  # frames may come batched: cut inside the next one
                yield nxt[: len(nxt) // 2]
                raise httpx.ReadError("connection cut by the test")
        yield buffer

    async def aclose(self) -> None:
        await self._inner.aclose()


def client_for(base_url: str, api_key: str, **options) -> tuple[AsyncPersonaClient, AsyncWire]:
    wire = AsyncWire()
    http = httpx.AsyncClient(transport=wire, timeout=30)
    options.setdefault("backoff_base", BACKOFF)
    return AsyncPersonaClient(api_key=api_key, base_url=base_url, http_client=http, **options), wire


# --- the parser ------------------------------------------------------------------------


def frames(text: str) -> tuple[list[tuple[str, str, str, bool]], SSEDecoder]:
    decoder = SSEDecoder()
    found = [(f.id, f.event, f.data, f.empty) for f in decoder.frames([text.encode()])]
    return found, decoder


def test_sse_parser_frames_comments_ids_and_the_last_frame():
    found, decoder = frames(
        ": a comment, then a heartbeat\n\n"
        "id: r.1\nevent: message.delta\ndata: {\"a\":\n data: 1}\n\n"  # a field name with a space is no field
        "data:no space\n\n"  # one leading space is dropped, if there is one
        "id: r.2\n\n"  # nothing but an id: the resume point moves, nothing is dispatched as an event
        "id: bad\0id\nevent: end\n\n"  # an id holding NUL is ignored; a frame without data still counts
        "retry: 1500\n"
        "data: last"  # the body ends without the blank line: not dispatched (tests/sdk/sse_cases.json)
    )
    assert found == [
        ("r.1", "message.delta", '{"a":', False),
        ("r.1", "message", "no space", False),
        ("r.2", "message", "", True),
        ("r.2", "end", "", False),
    ]
    assert decoder.retry_ms == 1500 and decoder.last_event_id == "r.2"
    found, _ = frames("data: a\ndata: b\n\n\n\n")
    assert found == [("", "message", "a\nb", False)]  # blank lines between frames dispatch nothing


def test_a_broken_connection_never_dispatches_half_a_frame():
    decoder = SSEDecoder()

    def body():
        yield b"id: r.1\ndata: {\"whole\": true}\n\n"
        yield b"id: r.2\ndata: {\"half"
        raise httpx.ReadError("cut")

    seen = []
    with pytest.raises(httpx.ReadError):
        for frame in decoder.frames(body()):
            seen.append(frame.id)
    assert seen == ["r.1"]  # the stream resumes from r.1: r.2 is replayed whole


# --- models ----------------------------------------------------------------------------


def test_answers_are_models_tolerant_of_what_a_newer_server_sends():
    session = {"sessionId": "s1", "orgId": "o", "workspaceId": "w", "personaId": "p", "userId": "u", "title": "",
               "status": "active", "messageCount": 2, "inputTokens": 1, "outputTokens": 2, "costUsdMicros": 3,
               "startedAt": "2026-11-25T10:00:00Z", "lastActiveAt": "2026-11-25T10:00:00Z", "endedAt": None,
               "personaVersion": 0, "unpricedReplies": 0}
    parsed = parse(ChatSession, {**session, "brandNewField": {"x": 1}})
    assert parsed.session_id == "s1" and parsed.message_count == 2 and isinstance(parsed.started_at, datetime)
    assert parsed.ended_at is None and parsed.model_extra == {"brandNewField": {"x": 1}}
    assert parsed.to_dict()["sessionId"] == "s1"
    # A value outside a closed set this client knows: still returned, not raised.
    newer = parse(ChatSession, {**session, "status": "paused"})
    assert newer.session_id == "s1" and newer.status == "paused"
    event = parse(ChatMessageEvent, {"event": "message.delta", "delta": "Hi"})
    assert (event.event, event.delta, event.reply) == ("message.delta", "Hi", None)


def test_params_go_on_the_wire_by_their_json_names():
    card = {"spec": "chara_card_v2", "data": {"name": "Ada", "first_mes": "Hello", "alternate_greetings": ["Hi"]}}
    assert to_wire(card, PARAMS, "CharacterCard") == card  # the card format's own snake_case names
    soul = to_wire({"name": "Ada", "speaking_style": "dry", "desire": "tea"}, PARAMS, "Soul")
    assert soul == {"name": "Ada", "speakingStyle": "dry", "desire": "tea"}
    assert to_wire({"speakingStyle": "dry"}, PARAMS, "Soul") == {"speakingStyle": "dry"}  # its own names pass
    persona = parse(Persona, {"id": "p", "displayName": "Ada"})
    assert to_wire(persona, PARAMS, None) == {"id": "p", "displayName": "Ada"}


# --- the async client on the stack -----------------------------------------------------------


def test_async_client_calls_errors_and_pagination(stack, tenants):
    tenant = tenants(plan="pro")

    async def scenario() -> None:
        client, wire = client_for(stack.http_url, tenant.api_key)
        async with client:
            persona = await client.personas.create(intent="A clockmaker who hears time")
            assert isinstance(persona, Persona) and persona.state == "active"
            assert (await client.personas.get(persona.id)) == persona
            assert "idempotency-key" in wire.requests[0].headers
            with pytest.raises(NotFoundError) as info:
                await client.personas.get(str(uuid.uuid4()))
            assert info.value.request_id and info.value.request_id == client.last_response.headers["x-request-id"]
            with pytest.raises(ValidationFailedError):
                await client.personas.create(intent="")
            for n in range(3):
                await client.api_keys.create(name=f"async-{n}", scopes=["personas:read"])
            sent = len(wire.requests)
            keys = [key async for key in client.api_keys.list_iter(limit=2)]
            assert len(wire.requests) - sent == 2 and len({k.id for k in keys}) == 4
            assert [k.id async for k in client.paginate(client.api_keys.list, limit=3)] == [k.id for k in keys]
        await wire.aclose()

    asyncio.run(scenario())


def test_async_connection_errors_are_retried_with_one_key():
    from persona_service.process.stack import free_port

    async def scenario() -> None:
        client, wire = client_for(f"http://127.0.0.1:{free_port()}", "sk_test_unused", max_retries=2)
        async with client:
            with pytest.raises(APIConnectionError):
                await client.personas.create(intent="A lighthouse keeper nobody can reach")
        assert len(wire.requests) == 3 and len({r.headers["idempotency-key"] for r in wire.requests}) == 1

    asyncio.run(scenario())


def test_async_chat_stream_resumes_after_a_dropped_connection(stack, tenants):
    tenant = tenants(plan="pro")

    async def scenario() -> None:
        client, wire = client_for(stack.http_url, tenant.api_key)
        async with client:
            persona = await client.personas.create(intent="A jazz drummer who counts in primes")
            session = await client.chat.create_session(persona_id=persona.id)
            wire.cut_next_stream(2)
            async with await client.chat.stream_message(session.session_id, content="Play me something") as stream:
                deltas = [text async for text in stream.text_deltas()]
                reply = await stream.get_final_message()
            assert stream.resumes == 1 and stream.status == "completed"
            opened = [r for r in wire.requests if r.url.path.endswith("messages:stream")]
            assert "last-event-id" not in opened[0].headers
            assert opened[1].headers["last-event-id"] == f"{stream.run_id}.2"
            assert "".join(deltas) == reply.content == stream.text and reply.usage.output_tokens > 0
            assert (await client.chat.get_session(session.session_id)).message_count == 2
        await wire.aclose()

    asyncio.run(scenario())
