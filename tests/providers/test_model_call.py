"""A model call is handed what it is for (`ModelCall`, kernel/models.py), never finds it in ambient state:
the kernel makes it from the servicer's call (process.capabilities.model_call), every wrapper passes it
down, the local model's CPU work takes its turn, the attempt-keyed double words a reply by its attempt."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from persona_service.kernel.models import NO_CALL, GenerationOptions, Message, ModelCall
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport import fair
from persona_service.kernel.transport.context import RequestContext
from persona_service.kernel.transport.runs import Run, RunOwner, RunSteps
from persona_service.process.capabilities import model_call
from persona_service.providers.attempt_keyed import TRIGGER, AttemptKeyed
from persona_service.providers.composed import Composed
from persona_service.providers.local import LocalProvider
from persona_service.providers.retrying import Retrying

MESSAGES = [Message("system", "You are terse."), Message("user", "Hello there")]
OPTIONS = GenerationOptions(task="reply")


def _ctx(plan: str = "team", attempt: int = 1) -> RequestContext:
    principal = Principal("api_key", "key_1", "org_caller", "ws_1", "usr_1", frozenset(), "member", plan, False)
    ctx = RequestContext("req_1", "/persona.v1.ChatService/SendMessage", None, None, principal)  # type: ignore[arg-type]
    ctx.run = RunSteps(Run("run_" + "0" * 32, RunOwner("org_caller", "ws_1"), ctx.method, attempt))
    return ctx


class Turns:
    """A `ModelCall.turn` that counts the turns taken and whether one is held."""

    def __init__(self) -> None:
        self.taken = 0
        self.held = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        self.taken, self.held = self.taken + 1, True
        try:
            yield
        finally:
            self.held = False


class Recording(LocalProvider):
    """The local model, keeping the `ModelCall` of each operation."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ModelCall]] = []

    def generate(self, messages, options, *, call=NO_CALL):
        self.calls.append(("generate", call))
        return super().generate(messages, options, call=call)

    def stream(self, messages, options, *, call=NO_CALL):
        self.calls.append(("stream", call))
        return super().stream(messages, options, call=call)

    def moderate(self, text, *, call=NO_CALL):
        self.calls.append(("moderate", call))
        return super().moderate(text, call=call)

    def embed(self, texts, *, call=NO_CALL):
        self.calls.append(("embed", call))
        return super().embed(texts, call=call)


def test_a_call_is_for_its_callers_organization_plan_and_run_attempt():
    call = model_call(_ctx("team", attempt=3))
    assert (call.org, call.weight, call.attempt) == ("org_caller", fair.weight_of("team"), 3)
    assert call.tag() == {"org": "org_caller", "weight": fair.weight_of("team"), "attempt": 3}
    anonymous = _ctx()
    anonymous.principal = None
    assert (model_call(anonymous).org, model_call(anonymous).attempt) == ("", 1)


def test_a_taken_over_run_calls_the_model_with_the_takeovers_attempt_wherever_it_runs():
    """The attempt is the run's (its task's lease), handed with the call: the same on any process."""
    first, second = model_call(_ctx(attempt=1)), model_call(_ctx(attempt=2))
    assert (first.attempt, second.attempt) == (1, 2)
    keyed = AttemptKeyed(LocalProvider())
    words = [Message("user", f"How are the hives? {TRIGGER}")]
    reply = "".join(d.text for d in keyed.stream(words, OPTIONS, call=second))
    assert reply.startswith("Take 2. ")


def test_the_calls_turn_is_a_turn_of_the_process_gate_for_its_organization():
    gate = fair.FairGate(1)
    fair.install(gate)
    try:
        done = threading.Event()
        call = model_call(_ctx())

        def step() -> None:
            with call.turn():
                done.set()

        with gate.turn("org_busy", 8):  # another organization's step holds the CPU
            threading.Thread(target=step).start()
            assert not done.wait(0.2)
            assert gate.waiting() == {"org_caller": fair.weight_of("team")}
        assert done.wait(10)
    finally:
        fair.install(None)  # type: ignore[arg-type]


def test_every_wrapper_hands_the_call_down_to_the_model():
    chat, moderation, embeddings = Recording(), Recording(), Recording()
    call = ModelCall(org="org_caller", weight=4, attempt=2)
    provider = Retrying(AttemptKeyed(Composed(chat, moderation, embeddings)), call, delays=())
    provider.generate(MESSAGES, OPTIONS)
    list(provider.stream(MESSAGES, OPTIONS))
    provider.moderate("hello")
    provider.embed(["hello"])
    seen = chat.calls + moderation.calls + embeddings.calls
    assert [op for op, _ in seen] == ["generate", "stream", "moderate", "embed"]
    assert all(seen_call is call for _, seen_call in seen)


def test_the_local_models_work_takes_its_calls_turn_a_step_at_a_time():
    turns, steps, local = Turns(), [], LocalProvider()
    call = ModelCall(turn=turns)
    local.generate(MESSAGES, OPTIONS, call=call)
    local.moderate("hello", call=call)
    local.embed(["hello"], call=call)
    assert turns.taken == 3
    for _delta in local.stream(MESSAGES, OPTIONS, call=call):
        steps.append(turns.held)  # each delta was made in a turn, given back before it is handed on
    assert turns.taken == 3 + len(steps) + 1 and not any(steps)
