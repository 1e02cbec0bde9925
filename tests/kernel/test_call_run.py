"""The durable run a call's operation is handed (`RequestContext.run`, kernel.transport.runs.RunSteps): a streamed
call's saves each step once and gives an attempt that takes the run over what the earlier one saved; a unary
call's (`NoRun`) keeps nothing. No stack: an operation is handed its run, so a constructed one is all it needs."""

from __future__ import annotations

import pytest
from persona_service.kernel.transport.context import NoRun, RequestContext
from persona_service.kernel.transport.runs import Run, RunLost, RunOwner, RunSteps


def _run(**kwargs) -> Run:
    return Run("run_1", RunOwner("org_x", "ws_x"), "/persona.v1.Test/Stream", **kwargs)


def test_an_attempt_taking_a_run_over_gets_what_the_earlier_one_saved():
    first, saved, made = _run(), {}, []
    first.save = saved.__setitem__
    assert RunSteps(first).checkpoint("step", lambda: made.append(1) or "answer") == "answer"
    again = RunSteps(_run(attempt=2, state=saved))
    assert again.checkpoint("step", lambda: made.append(2) or "another") == "answer"
    assert made == [1] and again.id == "run_1"


def test_a_unary_call_keeps_nothing():
    ctx = RequestContext("req_1", "/test", None, None)  # type: ignore[arg-type]
    assert isinstance(ctx.run, NoRun) and ctx.run.id is None
    assert [ctx.run.checkpoint("step", lambda n=n: n) for n in (1, 2)] == [1, 2]
    assert ctx.run.earlier_frames() == []


def test_a_run_whose_frames_redis_forgot_is_lost():
    run = _run(attempt=2)
    run.earlier = lambda: None
    with pytest.raises(RunLost):
        RunSteps(run).earlier_frames()
