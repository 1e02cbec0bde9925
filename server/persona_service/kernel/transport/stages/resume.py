"""Stream resume: a streaming call with a `Last-Event-ID` follows the run it
names (this process's live run, or its frames in Redis) instead of starting
one. Its request was validated when the run started: this body is not."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from persona_service.kernel.transport.context import unit_of_work
from persona_service.kernel.transport.runs import RunOwner
from persona_service.kernel.transport.stages.call import Call, Stage

if TYPE_CHECKING:
    from persona_service.kernel.transport.runs import Batch, Outcome, Run, Runs


class Following(NamedTuple):
    """What a streaming call relays: a run's frames, then its outcome."""

    run: Run | None  # the run this call started (None: it resumed one)
    frames: Iterator[Batch]
    outcome: Callable[[], Outcome | None]
    run_id: str


class Resume(Stage):
    def __init__(self, runs: Runs) -> None:
        self.runs = runs

    def __call__(self, call: Call) -> object:
        point = call.resume
        if point is None:
            return self.then(call)
        assert call.context is not None  # a caller's call (revived runs never pass the stages)
        unit_of_work(call.ctx).close()  # following needs no database
        frames, outcome = self.runs.resume(point, run_owner(call), call.meta.path, call.context.is_active)
        return Following(None, frames, outcome, point.run_id)


def run_owner(call: Call) -> RunOwner:
    caller = call.ctx.caller
    return RunOwner(caller.org_id, caller.workspace_id)
