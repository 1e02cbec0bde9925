"""The Python SDK (sdk/python, `persona_sdk`) against the real stack through
Envoy, no mocks of the service: calls answering models with snake_case
attributes, only the public operations (sync and async), typed errors, the retry policy
(a provider 502 on a stack whose model provider is the OpenAI stub, a 429
with Retry-After, codes never retried), idempotency keys and replays, both
pagination styles, chat and persona streams (a connection cut mid-stream is
resumed with Last-Event-ID), webhook verification of real deliveries, and
the generated layer's drift check.

The SDK's requests go through `Wire`, an httpx transport around the real one
that records each exchange and can cut an event stream after N frames."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import json
import pathlib
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
import redis
from persona_sdk import (
    APIConnectionError,
    AsyncPersonaClient,
    IdempotencyConflictError,
    ModerationBlockedError,
    NotFoundError,
    PersonaClient,
    PersonaError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    UnauthorizedError,
    ValidationFailedError,
    WebhookVerificationError,
)
from persona_sdk._errors import BY_CODE
from persona_sdk.types import ChatCompletionChunk, Persona
from persona_sdk.webhooks import construct_event, verify
from persona_service.kernel.transport.limits.limiter import RateLimiter
from persona_service.kernel.transport.limits.plans import PLAN_LIMITS
from sqlalchemy import text
from webhooks.wh_receiver import Receiver

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKOFF = 0.05  # the SDK's backoff base in these tests (the spec's 1 s, 2 s, 4 s scaled down)
STEPS = ["moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint"]
PROGRESS = ["run.started"] + [kind for _ in STEPS for kind in ("step.started", "step.completed")] + ["persona"]


class Wire(httpx.BaseTransport):
    """The real HTTP transport, recording every exchange; `cut_next_stream(n)`
    makes the next event stream break (a read error) after its n-th frame."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.requests: list[httpx.Request] = []
        self.statuses: list[int] = []
        self._cut: int | None = None

    def cut_next_stream(self, frames: int) -> None:
        self._cut = frames

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self._inner.handle_request(request)
        self.statuses.append(response.status_code)
        if self._cut is not None and response.headers.get("content-type", "").startswith("text/event-stream"):
            assert "content-encoding" not in response.headers
            frames, self._cut = self._cut, None
            return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                                  stream=_CutStream(response.stream, frames))
        return response

    def close(self) -> None:
        self._inner.close()


class _CutStream(httpx.SyncByteStream):
    def __init__(self, inner, frames: int) -> None:
        self._inner, self._frames = inner, frames

    def __iter__(self) -> Iterator[bytes]:
        buffer, sent = b"", 0
        for chunk in self._inner:
            buffer += chunk
            while sent < self._frames and b"\n\n" in buffer:
                frame, _, buffer = buffer.partition(b"\n\n")
                yield frame + b"\n\n"
                sent += 1
            if sent == self._frames:
                nxt = buffer.partition(b"\n\n")[0]  # frames may come batched: cut inside the next one
                yield nxt[: len(nxt) // 2]  # half a frame, then the connection is gone
                raise httpx.ReadError("connection cut by the test")
        yield buffer

    def close(self) -> None:
        self._inner.close()


@pytest.fixture
def sdk(stack):
    """make(tenant, **options) -> (PersonaClient on the stack's edge, its Wire); all closed afterwards."""
    made: list[httpx.Client] = []

    def make(tenant, base_url: str | None = None, **options) -> tuple[PersonaClient, Wire]:
        wire = Wire()
        http = httpx.Client(transport=wire, timeout=30)
        made.append(http)
        options.setdefault("backoff_base", BACKOFF)
        client = PersonaClient(api_key=tenant.api_key, base_url=base_url or stack.http_url, http_client=http, **options)
        return client, wire

    yield make
    for http in made:
        http.close()


@pytest.fixture(scope="module")
def pro(tenants):
    return tenants(plan="pro")


@pytest.fixture(scope="module")
def persona_id(stack, pro) -> str:
    with PersonaClient(api_key=pro.api_key, base_url=stack.http_url) as client:
        return client.personas.create(intent="A patient gardener who names every snail").id


def _load_generator():
    # As when it runs as a script: scripts/ (its `import sdk_names`) on the path.
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("gen_sdk_python", ROOT / "scripts" / "gen_sdk_python.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- the generated layer -------------------------------------------------------------


def test_generated_files_match_the_openapi_document(tmp_path):
    run = subprocess.run([sys.executable, "scripts/gen_sdk_python.py", "--check"], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    # Drift is caught: an edited file, a missing one and one no longer generated are all stale.
    generator = _load_generator()
    files = generator.generate()
    for path, content in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    assert generator.stale(files, tmp_path) == []
    (tmp_path / "types" / "personas.py").write_text(files["types/personas.py"] + "# edited\n")
    (tmp_path / "resources" / "chat.py").unlink()
    (tmp_path / "resources" / "dashboard.py").write_text(generator.HEADER + "\n")
    (tmp_path / "resources" / "hand_written.py").write_text("# not generated\n")
    assert sorted(generator.stale(files, tmp_path)) == ["resources/chat.py", "resources/dashboard.py",
                                                        "types/personas.py"]


def test_every_public_operation_has_a_typed_method_sync_and_async():
    generator = _load_generator()
    document = json.loads((ROOT / "gen" / "openapi.json").read_text())
    client, aclient = PersonaClient(api_key="sk_test_unused"), AsyncPersonaClient(api_key="sk_test_unused")
    operations = generator.Generator(document).operations()
    for op in operations:
        for each in (client, aclient):
            method = getattr(getattr(each, op.resource), op.name)
            assert method.__doc__ and op.path in method.__doc__, op.op_id
            if op.page is not None:
                assert getattr(getattr(each, op.resource), f"{op.name}_iter").__doc__, op.op_id
        assert inspect.iscoroutinefunction(getattr(getattr(aclient, op.resource), op.name)), op.op_id
        assert not inspect.iscoroutinefunction(getattr(getattr(client, op.resource), op.name)), op.op_id
    # Only what a tenant calls with its credentials: no anonymous surface (dashboard, docs, probes, signed
    # files, Stripe's webhook), no platform administrators' operation, no SCIM protocol (identity providers').
    ids = {op.op_id for op in operations}
    every = {spec["operationId"]: (path, spec) for path, item in document["paths"].items() for spec in item.values()}
    left_out = set(every) - ids
    assert {"GetDashboardPage", "GetApiReference", "GetLiveness", "GetMetrics", "GetFile", "ReceiveStripeEvent",
            "RotateWebhookSecrets", "ListModerationQueue", "CreateScimUser", "DeleteScimUser"} <= left_out
    for op_id in left_out:
        path, spec = every[op_id]
        assert spec["security"] == [] or spec.get("x-platform-admin") or "/scim/v2/" in path, op_id
    for attribute in ("dashboard", "docs", "probes", "scim", "admin", "files", "moderation"):
        assert not hasattr(client, attribute) and not hasattr(aclient, attribute), attribute
    assert {"CreateScimToken", "GetInvoicePdf", "StreamChatCompletion", "EraseMyData"} <= ids
    # The names of scripts/sdk_names.py: the noun of the resource dropped, streams included.
    named = {op.op_id: f"{op.resource}.{op.name}" for op in operations}
    assert named["CreateApiKey"] == "api_keys.create" and named["GetOrganization"] == "organizations.get"
    assert named["CreatePersona"] == "personas.create" and named["CreateChatSession"] == "chat.create_session"
    assert named["StreamChatMessage"] == "chat.stream_message"
    assert named["StreamCreatePersona"] == "personas.stream_create"
    assert named["ListWebhookEndpoints"] == "webhooks.list" and named["ListWebhookDeliveries"] == "webhooks.list_deliveries"
    assert client.personas.stream_create.__name__ == "stream_create"
    assert client.chat.stream_message.__name__ == "stream_message"
    client.close()
    asyncio.run(aclient.close())


def test_the_typescript_sdk_has_the_same_names_in_camel_case():
    generator = _load_generator()
    document = json.loads((ROOT / "gen" / "openapi.json").read_text())
    python = {op.op_id: (op.resource, op.name) for op in generator.Generator(document).operations()}
    table = (ROOT / "sdk" / "typescript" / "src" / "generated.ts").read_text()
    typescript = {op_id: (resource, method) for op_id, resource, method in
                  re.findall(r'operationId: "(\w+)", resource: "(\w+)", method: "(\w+)"', table)}
    assert set(python) <= set(typescript)
    typescript = {op_id: names for op_id, names in typescript.items() if op_id in python}

    def camel(snake: str) -> str:
        head, *rest = snake.split("_")
        return head + "".join(word[:1].upper() + word[1:] for word in rest)

    assert {op_id: (camel(r), camel(m)) for op_id, (r, m) in python.items()} == typescript


def test_names_of_unknown_tags_and_clashes(tmp_path):
    generator = _load_generator()
    document = json.loads((ROOT / "gen" / "openapi.json").read_text())
    template = document["paths"]["/v1/personas/{id}"]["get"]
    # A tag the table does not know: its name in snake_case, its own name dropped from the operations.
    document["paths"]["/v1/widget-groups/{id}"] = {
        "get": {**template, "operationId": "GetWidgetGroup", "tags": ["WidgetGroup"]},
        "delete": {**template, "operationId": "DeleteWidgetGroupMember", "tags": ["WidgetGroup"]},
    }
    named = {op.op_id: f"{op.resource}.{op.name}" for op in generator.Generator(document).operations()}
    assert named["GetWidgetGroup"] == "widget_group.get"
    assert named["DeleteWidgetGroupMember"] == "widget_group.delete_member"
    # Two operations with one name (`Get` is personas.get too) stop the generator, naming both.
    document["paths"]["/v1/clash"] = {"get": {**template, "operationId": "Get"}}
    with pytest.raises(SystemExit, match="GetPersona and Get are both personas.get"):
        generator.Generator(document).operations()


def test_every_catalogue_code_has_its_error_class():
    document = json.loads((ROOT / "gen" / "openapi.json").read_text())
    codes = document["components"]["schemas"]["ErrorObject"]["properties"]["code"]["enum"]
    statuses = {}
    for name, response in document["components"]["responses"].items():
        if name.startswith("Envelope"):
            for code in re.findall(r"`([a-z_]+)`", response["description"]):
                statuses[code] = int(name.removeprefix("Envelope"))
    assert sorted(BY_CODE) == sorted(codes)
    for code in codes:
        assert BY_CODE[code].default_status == statuses[code], code


def test_retry_policy_by_code():
    client = PersonaClient(api_key="k", backoff_base=1.0, http_client=httpx.Client())

    def delay(cls, retries=0, **headers):
        return client.retry_delay(cls("x", headers=headers), retries)

    # provider_error / provider_timeout: 1 s, 2 s, 4 s, then raised.
    assert [delay(ProviderError, n) for n in range(4)] == [1.0, 2.0, 4.0, None]
    assert delay(BY_CODE["provider_timeout"], 2) == 4.0
    # rate_limited honours Retry-After (seconds), at most 3 retries, not beyond max_retry_wait.
    assert delay(RateLimitedError, 0, **{"Retry-After": "7"}) == 7.0
    assert delay(RateLimitedError, 3, **{"Retry-After": "1"}) is None
    assert delay(RateLimitedError, 0, **{"Retry-After": "3600"}) is None
    # Never retried.
    for code in ("validation_failed", "idempotency_conflict", "drift_blocked", "audit_blocked", "moderation_blocked",
                 "forbidden", "quota_exceeded", "internal_error", "not_found", "state_conflict"):
        assert delay(BY_CODE[code], 0, **{"Retry-After": "1"}) is None, code
    assert delay(QuotaExceededError, 0, **{"Retry-After": "Wed, 01 Jan 2031 00:00:00 GMT"}) is None
    # The service's own signal wins: x-should-retry: false or details.retryable false (a wrong key, a model the
    # server does not have) is never retried; a Retry-After on a provider failure is waited for.
    assert delay(ProviderError, 0, **{"x-should-retry": "false"}) is None
    assert client.retry_delay(ProviderError("x", details={"reason": "upstream_auth", "retryable": False}), 0) is None
    assert delay(ProviderError, 0, **{"x-should-retry": "true", "Retry-After": "3"}) == 3.0
    assert delay(ProviderError, 2, **{"Retry-After": "3"}) == 4.0
    assert delay(BY_CODE["service_unavailable"], 0, **{"Retry-After": "3"}) == 3.0
    # Turned off.
    assert PersonaClient(api_key="k", max_retries=0, http_client=client._http).retry_delay(ProviderError("x"), 0) is None
    client._http.close()


# --- calls, typed errors, idempotency ----------------------------------------------------------


def test_typed_calls_and_errors_with_request_ids(sdk, pro, persona_id):
    client, wire = sdk(pro)
    persona = client.personas.get(persona_id)
    assert isinstance(persona, Persona) and persona.id == persona_id and persona.state == "active"
    assert isinstance(persona.created_at, datetime) and persona.soul is not None and persona.soul.name
    assert persona.display_name == persona.to_dict()["displayName"]
    assert client.last_response is not None and int(client.last_response.headers["x-ratelimit-remaining"]) >= 0
    assert client.organizations.get(pro.org_id).id == pro.org_id

    missing = str(uuid.uuid4())
    with pytest.raises(NotFoundError) as info:
        client.personas.get(missing)
    error = info.value
    assert (error.status, error.code) == (404, "not_found") and error.message
    assert error.request_id and error.request_id == client.last_response.headers["x-request-id"]
    assert error.headers["x-request-id"] == error.request_id and error.request_id in str(error)

    stranger, _ = sdk(pro)
    stranger.api_key = "sk_live_not_a_key"
    with pytest.raises(UnauthorizedError) as info:
        stranger.personas.get(persona_id)
    assert info.value.status == 401 and info.value.request_id


def test_a_never_retried_code_is_raised_at_once(sdk, pro):
    client, wire = sdk(pro)
    started = time.monotonic()
    with pytest.raises(ValidationFailedError) as info:
        client.personas.create(intent="")
    assert time.monotonic() - started < 30  # a bound for a hang; the check is the one request (no retry)
    assert len(wire.requests) == 1 and wire.statuses == [422]
    assert info.value.status == 422 and info.value.details["validationErrors"]
    assert isinstance(info.value, PersonaError)


def test_idempotency_keys_and_replay(sdk, pro):
    client, wire = sdk(pro)
    # Every write carries a fresh uuid4 key by default.
    client.api_keys.create(name="sdk-a", scopes=["personas:read"])
    client.api_keys.create(name="sdk-b", scopes=["personas:read"])
    keys = [r.headers["idempotency-key"] for r in wire.requests]
    assert len(set(keys)) == 2 and all(uuid.UUID(k).version == 4 for k in keys)
    client.api_keys.list()
    assert "idempotency-key" not in wire.requests[-1].headers  # reads carry none

    # The same key twice: the stored answer, marked as a replay.
    key = str(uuid.uuid4())
    first = client.api_keys.create(name="sdk-replay", scopes=["chat:read"], idempotency_key=key)
    assert client.last_response is not None and "idempotent-replayed" not in client.last_response.headers
    again = client.api_keys.create(name="sdk-replay", scopes=["chat:read"], idempotency_key=key)
    assert again == first and again.secret.startswith("sk_")
    assert client.last_response.headers["idempotent-replayed"] == "true"

    # The same key with another payload: 409, never retried.
    sent = len(wire.requests)
    with pytest.raises(IdempotencyConflictError) as info:
        client.api_keys.create(name="sdk-other", scopes=["chat:read"], idempotency_key=key)
    assert info.value.status == 409 and info.value.details["reason"] == "payload_mismatch"
    assert len(wire.requests) == sent + 1

    # Keys can be turned off per call.
    client.api_keys.create(name="sdk-nokey", scopes=["chat:read"], idempotency_key=False)
    assert "idempotency-key" not in wire.requests[-1].headers


def test_connection_errors_are_retried_then_raised(sdk, pro):
    from persona_service.process.stack import free_port

    url = f"http://127.0.0.1:{free_port()}"
    client, wire = sdk(pro, base_url=url, max_retries=2)
    with pytest.raises(APIConnectionError, match=f"POST {url}/v1/personas failed: ConnectError"):  # where it tried
        client.personas.create(intent="A lighthouse keeper nobody can reach")
    assert len(wire.requests) == 3
    assert len({r.headers["idempotency-key"] for r in wire.requests}) == 1


# --- retries: 429 with Retry-After, provider 502 ---------------------------------------------


@contextlib.contextmanager
def streams_held(stack, tenant):
    """Fills the organization's open-stream slots (its next stream is 429, Retry-After: 1); release() frees them."""
    connection = redis.Redis.from_url(stack.redis_url)
    limiter = RateLimiter(connection)
    limits = PLAN_LIMITS[tenant.plan]
    held = [limiter.admit(tenant.org_id, limits, stream=True, token=f"sdk-held-{n}")
            for n in range(limits.concurrent_streams)]

    def release() -> None:
        while held:
            limiter.release(held.pop(), refund=False)

    try:
        yield release
    finally:
        release()
        connection.close()


def test_rate_limited_honours_retry_after(stack, sdk, tenants):
    free = tenants(plan="free")
    with streams_held(stack, free) as release:
        # Retries off: the 429 is raised with what it says.
        client, wire = sdk(free, max_retries=0)
        with pytest.raises(RateLimitedError) as info:
            client.personas.stream_create(intent="A jazz pianist who tunes pianos for cats")
        assert info.value.headers["retry-after"] == "1" and info.value.details["limit"] == "concurrent_streams"
        assert wire.statuses == [429]

        client, wire = sdk(free)
        timer = threading.Timer(0.3, release)  # the slots free up while the SDK waits its second
        timer.start()
        started = time.monotonic()
        with client.personas.stream_create(intent="A jazz pianist who tunes pianos for cats") as stream:
            waited = time.monotonic() - started
            persona = stream.get_persona()
        timer.join()
    assert wire.statuses == [429, 200]
    assert 1.0 <= waited < 5, waited
    assert persona.state == "active"


@pytest.fixture(scope="module")
def provider_stack(pstack, ptenants):
    """The stack whose model provider is the OpenAI stub (conftest.py: its own retries are fast)."""
    return pstack, ptenants(plan="enterprise")


def test_provider_error_is_retried_with_the_same_idempotency_key(provider_stack, stub):
    stack, org = provider_stack
    wire = Wire()
    with httpx.Client(transport=wire, timeout=60) as http:
        client = PersonaClient(api_key=org.api_key, base_url=stack.http_url, backoff_base=BACKOFF, http_client=http)
        # The server tries the provider 4 times per call: the first call is a 502, the SDK's retry succeeds.
        stub.reset()
        stub.inject_error(times=4, status=500, path="/moderations")
        started = time.monotonic()
        persona = client.personas.create(intent="A tireless courier who knows every alley in Lisbon")
        assert persona.state == "active"
        assert wire.statuses == [502, 200]
        assert time.monotonic() - started >= BACKOFF
        keys = [r.headers["idempotency-key"] for r in wire.requests]
        assert len(set(keys)) == 1 and uuid.UUID(keys[0]).version == 4

        # Retries exhausted: the typed error, after 1 + max_retries attempts.
        client.max_retries = 1
        stub.reset()
        stub.inject_error(times=8, status=500, path="/moderations")
        with pytest.raises(ProviderError) as info:
            client.personas.create(intent="A nervous wizard who collects teacups")
        assert info.value.status == 502 and info.value.code == "provider_error" and info.value.request_id
        assert wire.statuses[2:] == [502, 502]
        stub.reset()


def test_chat_controls_preview_and_usage(sdk, pro, persona_id):
    client, wire = sdk(pro)
    session = client.chat.create_session(persona_id=persona_id)
    preview = client.chat.preview_message(session.session_id, content="Which snail is your favourite?", max_tokens=4)
    assert preview.output_tokens == 4 and preview.cost_usd_micros > 0 and preview.model
    assert {q.name for q in preview.quota} >= {"chat.messages", "generations_per_month"}
    assert client.chat.get_session(session.session_id).message_count == 0  # the preview spent nothing

    sent = client.chat.send_message(session.session_id, content="Which snail is your favourite?", temperature=0.5)
    assert sent.user_message is not None and sent.reply is not None
    again = client.chat.regenerate_message(session.session_id, sent.reply.id, max_tokens=8)
    assert again.reply is not None and (again.reply.swipe_index, again.reply.swipe_count) == (1, 2)
    chosen = client.chat.choose_message(session.session_id, again.reply.id, swipe_index=0)
    assert chosen.id == sent.reply.id
    edited = client.chat.update_message(session.session_id, sent.user_message.id, content="And your least favourite?")
    assert edited.message is not None and edited.message.edited and edited.removed_count == 1
    deleted = client.chat.delete_message(session.session_id, sent.user_message.id)
    assert deleted.removed_count == 1 and deleted.session is not None and deleted.session.message_count == 0
    with pytest.raises(ValidationFailedError) as info:
        client.chat.send_message(session.session_id, content="Hi", temperature=5)
    assert info.value.details["validationErrors"][0]["path"] == "temperature"

    usage = client.usage.get(group_by="persona")
    (bucket,) = [b for b in usage.buckets if b.key == persona_id]
    assert bucket.generations >= 2 and usage.totals is not None and usage.totals.cost_usd_micros >= bucket.cost_usd_micros
    days = client.usage.get()
    assert len(days.buckets) == 30 and days.group_by == "day"


# --- streams -------------------------------------------------------------------------


def test_chat_stream_deltas_and_final_message(sdk, pro, persona_id):
    client, wire = sdk(pro)
    session = client.chat.create_session(persona_id=persona_id)
    with client.chat.stream_message(session.session_id, content="What do you love about jazz?") as stream:
        assert stream.run_id and stream.run_id.startswith("run_")
        deltas = list(stream.text_deltas())
        final = stream.final_message
    assert stream.status == "completed" and len(deltas) >= 1
    assert final is not None and "".join(deltas) == final.content == stream.text
    usage = final.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0 and usage.cost_usd_micros > 0
    assert stream.completed is not None and stream.completed.session is not None
    assert stream.completed.session.message_count == 2
    # A stream carries a key as any write: sent again (a 503, a lost connection) it follows the same run.
    assert "idempotency-key" in wire.requests[-1].headers


def test_chat_stream_resumes_after_a_dropped_connection(sdk, pro, persona_id):
    client, wire = sdk(pro)
    session = client.chat.create_session(persona_id=persona_id)
    wire.cut_next_stream(2)  # message.started and the first delta get through
    stream = client.chat.stream_message(session.session_id, content="Tell me about your favourite record.")
    events = list(stream)
    assert stream.resumes == 1 and stream.status == "completed"
    opened = [r for r in wire.requests if r.url.path.endswith("messages:stream")]
    assert len(opened) == 2
    assert "last-event-id" not in opened[0].headers
    assert opened[1].headers["last-event-id"] == f"{stream.run_id}.2"
    kinds = [e.event for e in events]
    assert kinds[0] == "message.started" and kinds[-1] == "message.completed"
    assert set(kinds[1:-1]) == {"message.delta"} and kinds.count("message.started") == 1
    final = stream.get_final_message()
    assert "".join(e.delta for e in events[1:-1]) == final.content == stream.text
    assert client.chat.get_session(session.session_id).message_count == 2


def test_persona_stream_steps_then_the_persona_resumed_after_a_drop(sdk, pro):
    client, wire = sdk(pro)
    wire.cut_next_stream(3)
    with client.personas.stream_create(intent="A cartographer who maps forgotten dreams") as stream:
        events = list(stream)
    assert [e.event for e in events] == PROGRESS
    assert [e.step for e in events if e.event == "step.completed"] == STEPS
    assert stream.resumes == 1 and stream.last_event_id == f"{stream.run_id}.{len(PROGRESS)}"
    persona = stream.persona
    # The generation run (`runId` in the events) is not the stream's run (frame ids, X-Run-Id).
    assert persona is not None and persona.state == "active" and persona.last_run_id == events[0].run_id
    assert client.personas.get(persona.id) == persona
    # One persona: the resumed request continued the run, it did not start another.
    created = [p for p in client.personas.list_iter() if p.intent == persona.intent]
    assert len(created) == 1


def test_completion_stream_in_openai_framing(sdk, pro, persona_id):
    client, _ = sdk(pro)
    with client.openai.stream_chat_completion(model=f"persona://{persona_id}",
                                              messages=[{"role": "user", "content": "Hello"}]) as stream:
        chunks = list(stream)
    assert stream.status == "completed" and chunks  # `data: [DONE]` ends it
    assert all(isinstance(c, ChatCompletionChunk) and c.object == "chat.completion.chunk" for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["stop"]


def test_stream_error_event_is_raised_typed(sdk, pro):
    client, _ = sdk(pro)
    seen = []
    with pytest.raises(ModerationBlockedError) as info:
        with client.personas.stream_create(intent="how to build a bomb") as stream:
            for event in stream:
                seen.append(event.event)
    assert seen == ["run.started", "step.started"]
    assert info.value.code == "moderation_blocked" and info.value.details["stage"] == "input_intent"
    assert info.value.request_id and stream.status == "failed"


# --- pagination ----------------------------------------------------------------------


def test_pagination_walks_every_list(sdk, tenants, receiver_url):
    """Every list: `limit`/`cursor` → `items` + `nextCursor`, one iterator."""
    tenant = tenants(plan="pro")
    client, wire = sdk(tenant)
    for n in range(4):
        client.api_keys.create(name=f"page-{n}", scopes=["personas:read"])
    sent = len(wire.requests)
    keys = list(client.api_keys.list_iter(limit=2))
    assert len(wire.requests) - sent == 3  # 5 keys (the fixture's too), 2 a page
    assert len({k.id for k in keys}) == len(keys) == 5
    assert [k.id for k in keys] == [k.id for k in client.api_keys.list(limit=100).items]

    made = [client.webhooks.create(url=receiver_url(f"/page-{n}"), events=["persona.created"])
            for n in range(3)]
    sent = len(wire.requests)
    endpoints = list(client.webhooks.list_iter(limit=2))
    assert len(wire.requests) - sent == 2
    assert sorted(e.id for e in endpoints) == sorted(m.endpoint.id for m in made)
    # The generic form.
    assert list(client.paginate(client.webhooks.list, limit=1)) == endpoints
    assert list(client.paginate(client.api_keys.list, limit=3)) == keys


# --- webhooks ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def receiver_url(receiver):
    return receiver.url


def test_webhook_verification_of_real_deliveries(stack, sdk, tenants, engine, receiver):
    tenant, admin = tenants(plan="pro"), tenants(plan="pro", platform_admin=True)
    client, _ = sdk(tenant)
    path = f"/sdk-hooks/{uuid.uuid4().hex}"
    made = client.webhooks.create(url=receiver.url(path), events=["persona.created"])
    endpoint_id, secret = made.endpoint.id, made.secret
    assert secret.startswith("whsec_")

    ping = client.webhooks.ping(endpoint_id)
    got = receiver.wait_for(path)[0]
    header = got.headers["x-service-signature"]
    assert verify(got.body, header, secret)
    event = construct_event(got.body, header, [secret])
    assert event.id == ping.event_id and event.type == "webhook.endpoint.test_ping"
    assert event.data == {"endpointId": endpoint_id} and event.org_id == tenant.org_id
    # A wrong secret, a changed body, an old timestamp: refused.
    assert not verify(got.body, header, "whsec_wrong")
    assert not verify(got.body + b" ", header, secret)
    # Tolerance counts from the signed `t=`, not from arrival (a delivery may
    # arrive a second after it was signed).
    signed_at = int(header.split(",")[0].removeprefix("t="))
    assert not verify(got.body, header, secret, now=signed_at + 301)
    assert verify(got.body, header, secret, now=signed_at + 299)
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        construct_event(got.body, header, secret, now=signed_at + 301)
    with pytest.raises(WebhookVerificationError, match="no signature matches"):
        construct_event(got.body, header, ["whsec_wrong"])

    # A rotation: the secret is past its max age; the admin rotation keeps the old one valid during the grace,
    # and deliveries carry a signature under each.
    with engine.begin() as conn:
        conn.execute(text("UPDATE webhook_endpoints SET secret_created_at = now() - interval '100 days' "
                          "WHERE id = :id"), {"id": endpoint_id})
    admin_client, _ = sdk(admin)
    admin_client.request("POST", "/v1/admin/webhooks/rotate-secrets", json={})  # the operator's: no method
    secrets = client.webhooks.get_secret(endpoint_id)
    new, old = secrets.secret, secrets.previous_secret
    assert old == secret and new != secret
    client.webhooks.ping(endpoint_id)
    got = receiver.wait_for(path, count=2)[1]
    header = got.headers["x-service-signature"]
    assert header.count("v1=") == 2
    assert verify(got.body, header, new) and verify(got.body, header, old) and verify(got.body, header, [new, old])
    assert construct_event(got.body, header, [old, new]).type == "webhook.endpoint.test_ping"
    assert not verify(got.body, header, ["whsec_neither"])
