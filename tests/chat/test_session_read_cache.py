"""The chat session read (GET /v1/chat/sessions/{id}) kept in each server process's memory
(kernel/data/read_cache.py), on the real stack: two server processes (a second stack on the session's
PostgreSQL and Redis), the read cached in one (B) and every kind of write made through the other (A), native
gRPC straight to each. Once a write answers, B's read is the database's row: the write evicted it in every
process before it answered. Every write RPC of the chat services is a case here, found from the protos, so a
new one cannot be left out; erasure and persona deletion are cases too. Then: B does serve from memory (a row
changed behind the service's back stays as it was), never one tenant's row to another, and holds
PERSONA_READ_CACHE_ENTRIES rows at most. A write's eviction goes only to the processes holding the row
(process/invalidations.py): none when no other process read it, B alone once B read it."""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC

import grpc
import pytest
import redis
from google.protobuf import json_format
from persona.v1 import (
    chat_pb2,
    chat_pb2_grpc,
    openai_pb2,
    openai_pb2_grpc,
    options_pb2,
    personas_pb2,
    personas_pb2_grpc,
    privacy_pb2,
    privacy_pb2_grpc,
)
from persona_service.orgs.repository import OrgRepository
from persona_service.process.invalidations import ACK_PREFIX, INVALIDATION_CHANNEL, PROCESS_CHANNEL
from sqlalchemy import text
from support import SCOPES, Tenant, client_for, make_stack_beside, running

ENTRIES = 4  # the second stack's PERSONA_READ_CACHE_ENTRIES
TIMEOUT = 60


@pytest.fixture(scope="module")
def pair(stack, tmp_path_factory):
    with running(make_stack_beside(stack, tmp_path_factory.mktemp("read-cache"), servers=2,
                                   PERSONA_READ_CACHE_ENTRIES=str(ENTRIES))) as two:
        yield two


@dataclass
class Process:
    """One server process, called natively: its unary port and its stream port."""

    chat: chat_pb2_grpc.ChatServiceStub
    streams: chat_pb2_grpc.ChatServiceStub
    openai: openai_pb2_grpc.OpenAIServiceStub
    openai_streams: openai_pb2_grpc.OpenAIServiceStub
    personas: personas_pb2_grpc.PersonaServiceStub
    privacy: privacy_pb2_grpc.PrivacyServiceStub


@pytest.fixture(scope="module")
def processes(pair) -> list[Process]:
    channels = []
    made = []
    for port in pair.grpc_ports:
        unary = grpc.insecure_channel(f"127.0.0.1:{port}")
        stream = grpc.insecure_channel(f"127.0.0.1:{pair.stream_port(port)}")
        channels += [unary, stream]
        made.append(Process(chat_pb2_grpc.ChatServiceStub(unary), chat_pb2_grpc.ChatServiceStub(stream),
                            openai_pb2_grpc.OpenAIServiceStub(unary), openai_pb2_grpc.OpenAIServiceStub(stream),
                            personas_pb2_grpc.PersonaServiceStub(unary), privacy_pb2_grpc.PrivacyServiceStub(unary)))
    yield made
    for channel in channels:
        channel.close()


@pytest.fixture(scope="module")
def owner(tenants) -> Tenant:
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def persona_id(pair, owner) -> str:
    with client_for(pair) as http:
        r = http.post("/v1/personas", json={"intent": "A patient librarian who answers in short sentences"},
                      headers=owner.auth)
        assert r.status_code == 200, r.text
        return str(r.json()["id"])


def read(process: Process, tenant: Tenant, session_id: str) -> chat_pb2.ChatSession:
    return process.chat.GetChatSession(chat_pb2.GetChatSessionRequest(id=session_id), metadata=tenant.metadata,
                                       timeout=TIMEOUT)


def database_row(engine, session_id: str) -> dict | None:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT status, message_count, input_tokens, output_tokens, last_active_at, title "
                                "FROM chat_sessions WHERE id = :id"), {"id": session_id}).mappings().first()
    return dict(row) if row is not None else None


def as_read(session: chat_pb2.ChatSession) -> dict:
    return {"status": session.status, "message_count": session.message_count, "input_tokens": session.input_tokens,
            "output_tokens": session.output_tokens, "last_active_at": session.last_active_at.ToDatetime(),
            "title": session.title}


def the_same(read_row: dict, stored: dict) -> bool:
    stored = {**stored, "last_active_at": stored["last_active_at"].astimezone(UTC).replace(tzinfo=None)}
    return read_row == stored


# --- the writes: every write RPC of the chat services, and the others that change what the read returns ------


@dataclass
class World:
    """What a write case works on: process A (writes), the owner, a session with an exchange, its persona."""

    a: Process
    owner: Tenant
    session_id: str
    persona_id: str
    member: Tenant | None = None


def messages(w: World) -> list[chat_pb2.ChatMessage]:
    return list(w.a.chat.ListChatMessages(chat_pb2.ListChatMessagesRequest(id=w.session_id),
                                          metadata=w.owner.metadata, timeout=TIMEOUT).items)


def last_reply(w: World) -> chat_pb2.ChatMessage:
    return messages(w)[-1]


def regenerate(w: World) -> None:
    w.a.chat.RegenerateChatMessage(chat_pb2.RegenerateChatMessageRequest(session_id=w.session_id,
                                                                         id=last_reply(w).id),
                                   metadata=w.owner.metadata, timeout=TIMEOUT)


def choose(w: World) -> None:
    regenerate(w)
    w.a.chat.ChooseChatMessage(chat_pb2.ChooseChatMessageRequest(session_id=w.session_id, id=last_reply(w).id,
                                                                 swipe_index=0),
                               metadata=w.owner.metadata, timeout=TIMEOUT)


def completion(w: World, stream: bool) -> None:
    request = json_format.ParseDict({"model": f"persona://{w.persona_id}",
                                     "messages": [{"role": "user", "content": "Any poetry?"}]},
                                    openai_pb2.CreateChatCompletionRequest())
    if stream:
        list(w.a.openai_streams.StreamChatCompletion(request, metadata=w.owner.metadata, timeout=TIMEOUT))
    else:
        w.a.openai.CreateChatCompletion(request, metadata=w.owner.metadata, timeout=TIMEOUT)


WRITES: dict[str, Callable[[World], object]] = {
    "ChatService.CreateChatSession": lambda w: w.a.chat.CreateChatSession(
        chat_pb2.CreateChatSessionRequest(persona_id=w.persona_id), metadata=w.owner.metadata, timeout=TIMEOUT),
    "ChatService.EndChatSession": lambda w: w.a.chat.EndChatSession(
        chat_pb2.EndChatSessionRequest(id=w.session_id), metadata=w.owner.metadata, timeout=TIMEOUT),
    "ChatService.ArchiveChatSession": lambda w: w.a.chat.ArchiveChatSession(
        chat_pb2.ArchiveChatSessionRequest(id=w.session_id), metadata=w.owner.metadata, timeout=TIMEOUT),
    "ChatService.SendChatMessage": lambda w: w.a.chat.SendChatMessage(
        chat_pb2.SendChatMessageRequest(id=w.session_id, content="And then?"), metadata=w.owner.metadata,
        timeout=TIMEOUT),
    "ChatService.StreamChatMessage": lambda w: list(w.a.streams.StreamChatMessage(
        chat_pb2.SendChatMessageRequest(id=w.session_id, content="And then?"), metadata=w.owner.metadata,
        timeout=TIMEOUT)),
    "ChatService.RegenerateChatMessage": regenerate,
    "ChatService.ChooseChatMessage": choose,
    # The first message: an edit removes the later ones (the session's count changes).
    "ChatService.UpdateChatMessage": lambda w: w.a.chat.UpdateChatMessage(
        chat_pb2.UpdateChatMessageRequest(session_id=w.session_id, id=messages(w)[0].id, content="Edited."),
        metadata=w.owner.metadata, timeout=TIMEOUT),
    "ChatService.DeleteChatMessage": lambda w: w.a.chat.DeleteChatMessage(
        chat_pb2.DeleteChatMessageRequest(session_id=w.session_id, id=last_reply(w).id),
        metadata=w.owner.metadata, timeout=TIMEOUT),
    # The completions' session is their own (found in the database): it is the one read here.
    "OpenAIService.CreateChatCompletion": lambda w: completion(w, stream=False),
    "OpenAIService.StreamChatCompletion": lambda w: completion(w, stream=True),
    # Other services' writes of what the read returns: erasure deletes the user's sessions; a persona's deletion
    # leaves its sessions as they are (the read shows the persona's id and pinned version only).
    "PrivacyService.EraseMyData": lambda w: w.a.privacy.EraseMyData(
        privacy_pb2.EraseMyDataRequest(), metadata=w.member.metadata if w.member else (), timeout=TIMEOUT),
    "PersonaService.DeletePersona": lambda w: w.a.personas.DeletePersona(
        personas_pb2.DeletePersonaRequest(id=w.persona_id), metadata=w.owner.metadata, timeout=TIMEOUT),
}
CHAT_SERVICES = (chat_pb2.DESCRIPTOR.services_by_name["ChatService"],
                 openai_pb2.DESCRIPTOR.services_by_name["OpenAIService"])


def test_every_chat_write_rpc_is_a_case():
    writes = {f"{service.name}.{method.name}" for service in CHAT_SERVICES for method in service.methods
              if method.GetOptions().Extensions[options_pb2.policy].write}
    assert writes, "no write RPC found: the policy option moved?"
    assert writes <= set(WRITES), f"write RPCs with no read-after-write case here: {sorted(writes - set(WRITES))}"


def member_of(engine, tenants, owner: Tenant) -> Tenant:
    """A member of the owner's organization (the owner may not erase themselves), with a key of their own."""
    user_id = "usr_" + uuid.uuid4().hex[:20]
    with engine.begin() as conn:
        repo = OrgRepository(conn)
        repo.create_user(id=user_id, email=f"{user_id}@example.com", name="Member")
        repo.add_member(owner.org_id, user_id, "member")
    key = tenants.key(owner.org_id, owner.workspace_id, user_id, owner.plan, list(SCOPES))
    return Tenant(owner.org_id, owner.workspace_id, user_id, key, owner.plan)


def completions_session(engine, persona_id: str) -> str:
    with engine.connect() as conn:
        return str(conn.execute(text("SELECT id FROM chat_sessions WHERE persona_id = :p AND title <> 'cached'"),
                                {"p": persona_id}).scalar_one())


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_read_after_a_write_in_another_process_sees_it(write, pair, processes, engine, tenants, owner):
    a, b = processes
    with client_for(pair) as http:  # a persona of the case's own: its deletion is a case
        r = http.post("/v1/personas", json={"intent": "A patient librarian who answers in short sentences"},
                      headers=owner.auth)
        assert r.status_code == 200, r.text
        persona_id = r.json()["id"]
    member = member_of(engine, tenants, owner) if write == "PrivacyService.EraseMyData" else None
    session = a.chat.CreateChatSession(chat_pb2.CreateChatSessionRequest(
        persona_id=persona_id, title="cached", user_id=member.user_id if member else ""),
        metadata=owner.metadata, timeout=TIMEOUT)
    a.chat.SendChatMessage(chat_pb2.SendChatMessageRequest(id=session.session_id, content="Hello"),
                           metadata=owner.metadata, timeout=TIMEOUT)
    world = World(a, owner, session.session_id, persona_id, member)
    if write.startswith("OpenAIService."):
        completion(world, stream=False)  # its session, then read before the write under test
        world.session_id = completions_session(engine, persona_id)
    before = as_read(read(b, owner, world.session_id))
    assert as_read(read(b, owner, world.session_id)) == before

    WRITES[write](world)

    stored = database_row(engine, world.session_id)
    if stored is None:  # erased
        with pytest.raises(grpc.RpcError) as gone:
            read(b, owner, world.session_id)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        return
    after = as_read(read(b, owner, world.session_id))
    assert the_same(after, stored), (write, before, after, stored)


# --- it is a cache: served from memory, per tenant, bounded ----------------------------------------------------


def retitle_behind_the_service(engine, session_ids: list[str], title: str) -> None:
    """Change rows as no write of the service does (no eviction): what then reads the old title read memory."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE chat_sessions SET title = :t WHERE id = ANY(:ids)"), {"t": title, "ids": session_ids})


def new_sessions(process: Process, tenant: Tenant, persona_id: str, n: int) -> list[str]:
    return [process.chat.CreateChatSession(chat_pb2.CreateChatSessionRequest(persona_id=persona_id, title="cached"),
                                           metadata=tenant.metadata, timeout=TIMEOUT).session_id for _ in range(n)]


def test_reads_are_served_from_memory_per_tenant(processes, engine, tenants, owner, persona_id):
    _, b = processes
    [session_id] = new_sessions(processes[0], owner, persona_id, 1)
    assert read(b, owner, session_id).title == "cached"
    retitle_behind_the_service(engine, [session_id], "changed behind")
    assert read(b, owner, session_id).title == "cached"  # memory

    stranger = tenants(plan="enterprise")
    same_org = tenants.workspace(owner)
    for other in (stranger, same_org):
        with pytest.raises(grpc.RpcError) as refused:
            read(b, other, session_id)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert read(b, owner, session_id).title == "cached"  # the owner's entry stands


def test_memory_holds_the_configured_number_of_rows(processes, engine, owner, persona_id):
    _, b = processes
    session_ids = new_sessions(processes[0], owner, persona_id, ENTRIES + 1)
    for session_id in session_ids:
        read(b, owner, session_id)
    retitle_behind_the_service(engine, session_ids, "changed behind")
    titles = [read(b, owner, session_id).title for session_id in reversed(session_ids)]
    # Read newest first: the ENTRIES last read are in memory; the first one read was dropped, and reads anew.
    assert titles == ["cached"] * ENTRIES + ["changed behind"], titles


# --- its evictions reach the processes holding the row, no other ----------------------------------------------


class Confirming:
    """The test's subscriptions read in a thread of their own, each message confirmed as a server's listener
    confirms it (its ack list), then queued for the test. A sender waits for a confirmation from every subscriber
    its PUBLISH reached, this one too (a pattern subscription counts), up to ACK_WAIT_SECONDS (2 s): unconfirmed,
    each eviction sent to a holder waited that out."""

    def __init__(self, client: redis.Redis, bus) -> None:
        self.client, self.bus, self.messages = client, bus, queue.Queue()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stopping.is_set():
            message = self.bus.get_message(timeout=0.1)
            if message is None:
                continue
            if message["type"] in ("message", "pmessage"):
                acks = message["data"].decode().partition(" ")[0]
                if acks.startswith(ACK_PREFIX):
                    self.client.rpush(acks, 1)
            self.messages.put(message)

    def get_message(self, timeout: float):
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.bus.close()


def evictions_of(bus, session_id: str, end: str) -> list[str]:
    """The channels that carried an eviction of `session_id` before the marker `end` (published last by the
    test: a subscriber gets its messages in order, so no eviction sent before it can arrive after it)."""
    seen = []
    for _ in range(10_000):
        message = bus.get_message(timeout=TIMEOUT)
        assert message is not None, "the marker did not arrive"
        if message["type"] not in ("message", "pmessage"):
            continue
        data = message["data"].decode()
        if data == end:
            return seen
        if "read:chat_session:" in data and session_id in data:
            seen.append(message["channel"].decode())
    raise AssertionError("the marker did not arrive")


def test_an_eviction_goes_to_the_processes_holding_the_row(pair, processes, owner, persona_id):
    a, b = processes
    client = redis.Redis.from_url(pair.redis_url)
    marker = f"test:evictions:{uuid.uuid4().hex}"
    subscriptions = client.pubsub()
    subscriptions.subscribe(INVALIDATION_CHANNEL, marker)
    subscriptions.psubscribe(PROCESS_CHANNEL + "*")
    bus = Confirming(client, subscriptions)
    [session_id] = new_sessions(a, owner, persona_id, 1)

    def reply_and_evictions() -> list[str]:
        a.chat.SendChatMessage(chat_pb2.SendChatMessageRequest(id=session_id, content="Hello"),
                               metadata=owner.metadata, timeout=TIMEOUT)
        end = uuid.uuid4().hex
        client.publish(marker, end)
        return evictions_of(bus, session_id, end)

    try:
        assert reply_and_evictions() == []  # read nowhere: the reply's eviction wakes no process
        read(a, owner, session_id)  # held by A, the writer: applied there, sent to no other
        assert reply_and_evictions() == []
        read(b, owner, session_id)  # B holds it now
        [channel] = reply_and_evictions()
        assert channel.startswith(PROCESS_CHANNEL)
        assert reply_and_evictions() == []  # B dropped it and holds it no longer
    finally:
        bus.close()
        client.close()
