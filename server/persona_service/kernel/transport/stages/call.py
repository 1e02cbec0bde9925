"""What the request pipeline's stages share: the per-call state (`Call`),
what a `Stage` is, and how an ordered list of stages is composed.

A stage is middleware: it does its part, then hands the call on (`self.then`),
or answers without handing it on (an idempotent replay, a resumed stream),
or raises an ApiError. The pipeline composes each method's list once; the
last link is the method's operation (unary, server-streaming or byte stream
alike), so the three kinds of handler share the same stages."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from persona_service.kernel.transport.limits.limiter import Admission

if TYPE_CHECKING:
    import grpc
    from google.protobuf.message import Message

    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.idempotency import Claim
    from persona_service.kernel.transport.policy import MethodMeta
    from persona_service.kernel.transport.runs import ResumePoint, Run

# Set by the edge's Lua filter on requests that arrived as HTTP/JSON.
EDGE_MARK = "x-persona-edge"
# Set by the edge on a HEAD (answered as the GET, without its body): a raw body need not be produced.
HEAD_MARK = "x-persona-head"
LOG_CARRIER = "x-persona-log"


class Undecodable:
    """Stands in for a request the deserializer refused (e.g. protobuf's
    nesting limit of 100, which deeply nested JSON objects reach at ~33
    levels), so the pipeline answers 400 (stages.validate.KnownFields)
    instead of gRPC's bare INTERNAL."""


class Call:
    """Per-call state that the stages share."""

    def __init__(self, ctx: RequestContext, metadata: dict[str, str], meta: MethodMeta,
                 request: Message | Undecodable, context: grpc.ServicerContext | None = None) -> None:
        self.ctx = ctx
        self.metadata = metadata
        self.meta = meta
        # The request: a message, or Undecodable (refused by `KnownFields`: later stages read a message).
        self.request = request
        self.context = context  # None for a run revived from another process
        self.admission = Admission()
        self.claim: Claim | None = None
        self.committed_claim: Claim | None = None  # the claim once the unit of work committed its outcome
        self.reached_operation = False
        self.succeeded = False
        # The run goes on in another process (taken over after a drain or a database outage): its
        # quota unit stays charged, as the run will still complete there.
        self.continues_elsewhere = False
        self.run: Run | None = None  # the durable run this call's operation is (streaming RPCs)
        self.resume: ResumePoint | None = None  # the `Last-Event-ID` a streaming call resumes from

    @property
    def message(self) -> Message:
        """The request as a message: `KnownFields`, in every chain, refused an Undecodable before any stage that
        reads it (`Validate`, idempotency, the operation; a revived run's request is a message)."""
        return cast("Message", self.request)


# A stage hands on, or makes, the operation's answer without reading it: a message (unary), the run followed
# (resume.Following: a stream), the messages of a byte stream. The pipeline knows which its handler gets.
Next = Callable[[Call], object]


class Stage:
    """One step of the pipeline: does its part, then hands the call on
    (`self.then(call)`), or answers without handing it on, or raises."""

    then: Next  # the rest of the chain, set by `compose`

    def __call__(self, call: Call) -> object:
        raise NotImplementedError


def compose(stages: Sequence[Stage], operation: Next) -> Next:
    """One callable running `stages` in order, then `operation`. Each stage
    is linked to the next once, here (a copy: a stage may be in several
    chains), so a call pays one frame per stage and nothing to link them."""
    chain = operation
    for stage in reversed(stages):
        linked = copy.copy(stage)
        linked.then = chain
        chain = linked
    return chain
