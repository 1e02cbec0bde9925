"""Calls of the model from server processes, answered by runner processes.

A server process does no long model work on its threads: its provider is a `RemoteProvider`, whose every call
(a completion, moderation, embeddings, a soul or a voice, a portrait) is queued in Redis for the runners and
waited for; except the local offline model's unary completions, moderation and embeddings of a short text
(`here`, providers.factory.in_process_calls), answered on the calling thread: a few milliseconds of CPU at most,
less than its round trip through Redis and a runner cost (issue 50). A stream (a durable run's) always goes to
the runners. The queue is the provider configuration's
(providers.factory.fingerprint): stacks that share a Redis but are set up for other models never answer each other's calls. The unary call that made it keeps its own unit of work, timeouts, errors and idempotency: only the
model's part moves, tagged with the call's `ModelCall` (its organization, plan weight and run attempt). A runner (`ModelCallServer`) takes calls with a blocking read (at once, no poll), runs them
on its pool, organizations taking turns weighted by plan (kernel.transport.fair), one step at a time under the process's
gate, and answers in Redis, waking the waiter through pub/sub (kernel.wakeups): on the waiting process's own
inbox, with the answer, so the server reads no Redis for it (the answer is kept in Redis as well, read there only
when the delivery was lost).

A call is never lost with a runner. A runner marks each call it still holds a tick (`TAKEN_RENEW_SECONDS`) after
taking it (`taken`, a key renewed every tick while the call waits or runs there; a call answered within its first
tick, most of them, costs no mark); the waiting server puts a call back on the queue when it has been neither
queued nor marked nor answered for `LOST_AFTER_SECONDS`, more than two ticks (its runner was killed: the mark
lapsed, or never came), and another runner answers it. A
runner that is stopped (SIGTERM, a rolling restart) takes no more calls and answers those it took before
it exits. A call nobody answers within its timeout (no runner at all) fails as the provider timing out
(`provider_timeout`, which the provider's retries try again).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import TypeVar, cast

import redis

from persona_service.kernel import wakeups
from persona_service.kernel.errors import ApiError
from persona_service.kernel.json_values import JSONObject, as_object
from persona_service.kernel.json_values import items as json_items
from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    ImageProvider,
    Message,
    Model,
    ModelCall,
    ModerationResult,
    ProviderError,
    ProviderTimeout,
    ToolCall,
)
from persona_service.kernel.transport import fair

log = logging.getLogger("persona_service.model_calls")

QUEUE = "persona:model:calls:"  # + the provider configuration's fingerprint (providers.factory.fingerprint)
ANSWER_TTL = 120  # seconds an answer waits for its caller (one that gave up leaves nothing behind for long)
# A taken call's mark lapses this long after its runner's last renewal (every TAKEN_RENEW_SECONDS): then the
# waiting server knows the runner died with it and queues it again.
TAKEN_SECONDS = 5
TAKEN_RENEW_SECONDS = 0.25
# How long a waiting server finds its call neither queued nor marked nor answered before it queues it again:
# above the two ticks a call held by a live runner can go unmarked (taken just after a tick, marked at the next
# but one).
LOST_AFTER_SECONDS = 1.0
# How long a stopped runner waits for the calls it took to be answered before it exits (the rest lapse).
CLOSE_SECONDS = 20.0
# The local provider's persona pipeline (souls, voices): model work reached by name, beyond the interface.
PIPELINE_STEPS = ("soul_from_intent", "refine_soul", "voice_from_soul")
# The most text (characters, all of a call's texts together) a call answered here may hold: a longer one goes to
# a runner, so a unary thread never runs long model work (8,000 characters: ~2.4 ms of CPU to embed, ~1.7 ms to
# moderate, measured on the loaded 2-core machine; a completion of 50 messages, 4,700 characters, ~0.2 ms).
IN_PROCESS_MAX_CHARS = 8000


def queue_key(pool: str) -> str:
    """The calls of the processes configured as `pool` (runners with other provider settings never take them)."""
    return QUEUE + pool


def _answer_key(call_id: str) -> str:
    return f"persona:model:answer:{call_id}"


def _taken_key(call_id: str) -> str:
    return f"persona:model:taken:{call_id}"


# --- what travels (JSON) -------------------------------------------------------------------------------


R = TypeVar("R")


def _built(record: type[R], fields: object, **nested: object) -> R:
    """The record (Completion, Delta, Message...) that `asdict` wrote as `fields` on the other side, the records
    nested in it built by the caller: rebuilt as the same release's dataclass, whose fields are not checked again."""
    return record(**{**_fields(fields), **nested})


def _fields(value: object) -> JSONObject:
    """A JSON object of this module's own (a call, its arguments, an answer, a record's fields)."""
    if not isinstance(value, dict):
        raise TypeError(f"not a JSON object: {type(value).__name__}")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {type(value).__name__}")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an integer: {type(value).__name__}")
    return value


def _number(value: object) -> float:
    """An int or a float, as the JSON holds it (an embedding's component, a Retry-After)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {type(value).__name__}")
    return value


def _tool_calls(items: object) -> tuple[ToolCall, ...]:
    return tuple(_built(ToolCall, item) for item in json_items(items or ()))


def _completion(fields: object) -> Completion:
    return _built(Completion, fields, tool_calls=_tool_calls(_fields(fields).get("tool_calls")))


def _delta(fields: object) -> Delta:
    call, usage = _fields(fields).get("tool_call"), _fields(fields).get("usage")
    return _built(Delta, fields, tool_call=_built(ToolCall, call) if call else None,
                  usage=_completion(usage) if usage else None)


def _chat_args(messages: list[Message], options: GenerationOptions) -> JSONObject:
    return {"messages": [asdict(m) for m in messages], "options": asdict(options)}


def _chat_chars(messages: list[Message], options: GenerationOptions) -> int:
    """How much text a completion reads (its messages, their tool calls, the tools offered): its bound here."""
    return (sum(len(m.content) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls) for m in messages)
            + sum(len(json.dumps(tool)) for tool in options.tools))


def _chat_from(args: JSONObject) -> tuple[list[Message], GenerationOptions]:
    messages = [_built(Message, m, tool_calls=_tool_calls(_fields(m).get("tool_calls")))
                for m in json_items(args["messages"])]
    options = _fields(args["options"])
    return messages, _built(GenerationOptions, options, tools=tuple(json_items(options.get("tools") or ())))


def _pipeline_step(step: str, provider: Model, args: JSONObject, call: ModelCall) -> object:
    return getattr(provider, step)(*json_items(args["args"]), call=call)  # model work beyond the interface, by name


def _images(provider: Model) -> ImageProvider:
    """The runner's model as the portraits' provider (the configured model draws them: providers.factory)."""
    return cast(ImageProvider, provider)


def _prompt(fields: object) -> ImagePrompt:
    return _built(ImagePrompt, fields, traits=tuple(json_items(_fields(fields)["traits"])))


# An operation as a runner runs it: (the provider, the call's arguments, its ModelCall) -> a JSON-able answer.
_OPERATIONS: dict[str, Callable[[Model, JSONObject, ModelCall], object]] = {
    "generate": lambda p, a, c: asdict(p.generate(*_chat_from(a), call=c)),
    "stream": lambda p, a, c: [asdict(d) for d in p.stream(*_chat_from(a), call=c)],
    "moderate": lambda p, a, c: asdict(p.moderate(_text(a["text"]), call=c)),
    "embed": lambda p, a, c: p.embed([_text(t) for t in json_items(a["texts"])], call=c),
    "generate_image": lambda p, a, c: base64.b64encode(_images(p).generate_image(_prompt(a["prompt"]),
                                                                                 call=c)).decode(),
    "edit_image": lambda p, a, c: base64.b64encode(_images(p).edit_image(base64.b64decode(_text(a["image"])),
                                                                         _text(a["instruction"]), call=c)).decode(),
    **{step: functools.partial(_pipeline_step, step) for step in PIPELINE_STEPS},
}


def _model_call(call: JSONObject) -> ModelCall:
    """A queued call's `ModelCall` on the runner that answers it, whose turn it holds already (`answer`)."""
    return ModelCall(org=_text(call["org"]), weight=_int(call["weight"]), attempt=_int(call.get("attempt", 1)))


class RemoteProvider:
    """The provider of a server process: each call is run by a runner process and waited for."""

    def __init__(self, local: Model, client: redis.Redis, bus: wakeups.Wakeups, timeout_seconds: float,
                 pool: str, here: frozenset[str] = frozenset()):
        self.local = local  # what a runner runs: its name and attributes are this provider's
        self.here = here  # the operations ("moderate", "embed") answered on the calling thread when short
        self.name = local.name
        self.redis = client
        self.bus = bus
        self.timeout_seconds = timeout_seconds
        self.queue = queue_key(pool)

    def __getattr__(self, name: str) -> object:
        if name in PIPELINE_STEPS and hasattr(self.local, name):
            return lambda *args, call=NO_CALL: self._call(name, {"args": list(args)}, call)
        if name == "local" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.local, name)

    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion:
        if "generate" in self.here and _chat_chars(messages, options) <= IN_PROCESS_MAX_CHARS:
            return self.local.generate(messages, options, call=call)
        return _completion(self._call("generate", _chat_args(messages, options), call))

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]:
        return iter([_delta(d) for d in json_items(self._call("stream", _chat_args(messages, options), call))])

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        if "moderate" in self.here and len(text) <= IN_PROCESS_MAX_CHARS:
            return self.local.moderate(text, call=call)
        fields = _fields(self._call("moderate", {"text": text}, call))
        return _built(ModerationResult, {"flagged": fields["flagged"], "scores": fields["scores"]},
                      categories=tuple(json_items(fields["categories"])),
                      matches=tuple(tuple(json_items(m)) for m in json_items(fields["matches"])))

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]:
        if "embed" in self.here and sum(map(len, texts)) <= IN_PROCESS_MAX_CHARS:
            return self.local.embed(list(texts), call=call)
        return [[_number(x) for x in json_items(vector)]
                for vector in json_items(self._call("embed", {"texts": list(texts)}, call))]

    def generate_image(self, prompt: ImagePrompt, *, call: ModelCall = NO_CALL) -> bytes:
        return base64.b64decode(_text(self._call("generate_image", {"prompt": asdict(prompt)}, call)))

    def edit_image(self, image: bytes, instruction: str, *, call: ModelCall = NO_CALL) -> bytes:
        return base64.b64decode(_text(self._call("edit_image", {"image": base64.b64encode(image).decode(),
                                                                "instruction": instruction}, call)))

    def _call(self, op: str, args: JSONObject, call: ModelCall) -> object:
        call_id = "model_" + uuid.uuid4().hex
        key = _answer_key(call_id)
        payload = json.dumps({"id": call_id, "op": op, "args": args, **call.tag(), "inbox": self.bus.inbox})
        answered = self.bus.watch_inbox(key)
        try:
            self.redis.rpush(self.queue, payload)
            deadline = time.monotonic() + self.timeout_seconds
            unseen_since: float | None = None  # since when every look found the call neither queued nor taken
            while True:  # (no read before the first wake-up: nobody can have answered yet)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ProviderTimeout(self.name, f"no runner answered the model call within {self.timeout_seconds}s",
                                          kind="no_runner")
                woken = answered.wait(min(left, wakeups.FALLBACK_SECONDS))
                answered.clear()
                # Where the call is, before its answer is read: a runner answers, then drops its mark.
                now = time.monotonic()
                if woken or self._pending(call_id, payload):
                    unseen_since = None
                elif unseen_since is None:
                    unseen_since = now
                raw = (self.bus.delivered(key) if woken else None) or self.redis.get(key)
                if raw is not None:
                    return _result(self.name, json.loads(raw))
                # Unseen for a while, not a glimpse of a runner between taking the call and marking it.
                if unseen_since is not None and now - unseen_since >= LOST_AFTER_SECONDS:
                    log.warning("model call %s (%s) lost with its runner: queued again", call_id, op)
                    self.redis.lpush(self.queue, payload)  # first in line: it has waited already
                    unseen_since = None
        except redis.RedisError as exc:
            raise ProviderError(self.name, f"the model's runners are unreachable: {exc}",
                                kind="runners_unreachable") from exc
        finally:
            self.bus.unwatch(key, answered)

    def _pending(self, call_id: str, payload: str) -> bool:
        """Whether the call is still queued or held by a live runner."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(_taken_key(call_id))
        pipe.lpos(self.queue, payload)
        taken, position = pipe.execute()
        return bool(taken) or position is not None


def _result(provider: str, answer: JSONObject) -> object:
    if answer.get("error") is None:
        return answer["value"]
    failure = _fields(answer["error"])
    if failure["kind"] == "provider":
        error_class = ProviderTimeout if failure["code"] == ProviderTimeout.code else ProviderError
        status, retry_after = failure["status"], failure.get("retry_after")
        err: ApiError = error_class(_text(failure["provider"]), _text(failure["reason"]),
                                    as_object(failure["upstream"]), None if status is None else _int(status),
                                    kind=_text(failure.get("cause") or ""),
                                    upstream_message=_text(failure.get("said") or ""),
                                    retry_after=None if retry_after is None else _number(retry_after))
    else:
        err = ApiError(_text(failure["message"]), as_object(failure.get("details")) or {}, code=_text(failure["code"]))
    err.details = as_object(failure.get("details")) or err.details
    if isinstance(err, ProviderError):
        err.operation = str(err.details.get("operation") or "")
    raise err


def _failure(exc: Exception) -> JSONObject:
    if isinstance(exc, ProviderError):
        return {"kind": "provider", "code": exc.code, "provider": exc.provider, "reason": exc.reason,
                "upstream": exc.upstream, "status": exc.upstream_status, "details": exc.details, "cause": exc.kind,
                "said": exc.upstream_message, "retry_after": exc.retry_after}
    if isinstance(exc, ApiError):
        return {"kind": "api", "code": exc.code, "message": exc.message, "details": exc.details}
    return {"kind": "api", "code": "internal_error", "message": "", "details": {}}


class ModelCallServer:
    """A runner's side: takes queued model calls at once and answers them on its pool, marking each taken
    until it is answered (a runner killed meanwhile leaves its calls to be queued again)."""

    def __init__(self, provider: Model, client: redis.Redis, workers: int, pool: str) -> None:
        self.provider = provider
        self.queue = queue_key(pool)
        self.redis = client
        self.pool = fair.FairPool(workers, "model")
        self._closing = threading.Event()
        self._taker: threading.Thread | None = None
        self._taken: set[str] = set()  # ids of the calls taken and not yet answered
        self._marked: set[str] = set()  # those of them marked taken in Redis (held a tick or more)
        self._settled = threading.Condition()

    def start(self) -> None:
        self._taker = threading.Thread(target=self._take, name="model-calls", daemon=True)
        self._taker.start()
        threading.Thread(target=self._renew, name="model-calls-taken", daemon=True).start()

    def close(self, wait_seconds: float = CLOSE_SECONDS) -> None:
        """Take no more calls; answer those taken (for at most `wait_seconds`: the rest lapse to other runners)."""
        self._closing.set()
        with self._settled:
            self._settled.notify_all()  # an idle renewer returns
        if self._taker is not None:
            self._taker.join()  # a call its last read took is in `_taken` now
        deadline = time.monotonic() + wait_seconds
        with self._settled:
            while self._taken and self._settled.wait(max(0.0, deadline - time.monotonic())):
                pass
        self.pool.shutdown()

    def _take(self) -> None:
        while not self._closing.is_set():
            try:
                taken = self.redis.blpop([self.queue], timeout=1)
            except redis.RedisError as exc:
                log.warning("model calls not taken: Redis is unavailable (%s)", exc)
                self._closing.wait(1.0)
                continue
            if taken is None:
                continue
            call = json.loads(taken[1])
            with self._settled:
                self._taken.add(call["id"])
                self._settled.notify_all()  # the renewer's tick starts
            self.pool.submit(call["org"], call["weight"], functools.partial(self.answer, call))

    def _renew(self) -> None:
        """Every tick while calls are held, mark (again) those held since the previous tick (waiting for a
        thread or running), so their marks never lapse; until closed and all answered. Idle, it sleeps."""
        held: set[str] = set()
        while True:
            with self._settled:
                while not self._taken and not self._closing.is_set():
                    self._settled.wait()
                if not self._taken:
                    return
            time.sleep(TAKEN_RENEW_SECONDS)
            with self._settled:
                ids = [call_id for call_id in self._taken if call_id in held]
                self._marked.update(ids)
                held = set(self._taken)
            if ids:
                self._mark(ids)

    def _mark(self, call_ids: list[str]) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            for call_id in call_ids:
                pipe.set(_taken_key(call_id), os.getpid(), ex=TAKEN_SECONDS)
            pipe.execute()
        except redis.RedisError as exc:  # renewed again in a second, before the mark can lapse
            log.warning("model calls' marks not kept: %s", exc)

    def answer(self, call: JSONObject) -> None:
        call_id, inbox = _text(call["id"]), call.get("inbox")
        try:
            with fair.turn_for(_text(call["org"]), _int(call["weight"])):
                answer: JSONObject = {"value": _OPERATIONS[_text(call["op"])](self.provider, _fields(call["args"]),
                                                                              _model_call(call))}
        except Exception as exc:  # noqa: BLE001 - the caller gets it as the provider's failure
            if not isinstance(exc, ApiError):
                log.exception("model call %s (%s) failed", call_id, call["op"])
            answer = {"error": _failure(exc)}
        key, text = _answer_key(call_id), json.dumps(answer)
        with self._settled:
            marked = call_id in self._marked
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(key, text, ex=ANSWER_TTL)
            if inbox:
                wakeups.deliver(pipe, _text(inbox), key, text)
            else:  # (a call queued by a server of an earlier release)
                wakeups.publish(pipe, [key])
            if marked:
                pipe.delete(_taken_key(call_id))  # after the answer: its waiter sees one or the other
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("model call %s answered but not delivered: %s", call_id, exc)
        finally:
            with self._settled:
                self._taken.discard(call_id)
                self._marked.discard(call_id)
                self._settled.notify_all()
