"""The call a servicer method is handed: who calls, its unit of work, its headers and what runs after its commit.

The pipeline (kernel.transport.pipeline) calls every servicer method as `Method(request, ctx)` with this
`RequestContext` in place of gRPC's context: a servicer reads its call, the durable run included, from its
argument, never from ambient state (`ambient_reads` in tests/test_architecture.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.principal import Principal

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from persona_service.kernel.data.work import Work

T = TypeVar("T")


class DurableRun(Protocol):
    """The durable run a streamed call's operation is (kernel.transport.runs.RunSteps), as the operation uses it."""

    @property
    def id(self) -> str | None:
        """The run's id (its `X-Run-Id` and `id:` lines); None outside a run."""

    @property
    def attempt(self) -> int:
        """Which attempt of the run this is: 1 for the first (and outside a run), the next on each takeover."""

    def checkpoint(self, key: str, make: Callable[[], T]) -> T:
        """`make()`'s value, saved with the run: a run taken over after its process died gets the saved value
        instead of making it again. `make` must change nothing the unit of work would not roll back."""

    def earlier_frames(self) -> list[bytes]:
        """The frames earlier attempts of the run emitted (clients may have seen them); [] on the first."""


class NoRun:
    """A unary call's: nothing is kept, each step is made."""

    id = None
    attempt = 1

    @staticmethod
    def checkpoint(key: str, make: Callable[[], T]) -> T:
        return make()

    @staticmethod
    def earlier_frames() -> list[bytes]:
        return []


@dataclass
class RequestContext:
    request_id: str
    method: str
    # The call's unit of work: kept private (`_uow`; the kernel's stages reach it by `unit_of_work`), so that what a
    # servicer is handed of it is `work`, its repositories, never its connection (kernel.data.work).
    uow: InitVar[UnitOfWork]
    client_ip: str | None
    principal: Principal | None = None
    # time.perf_counter() when the call arrived (latency metrics).
    started: float = 0.0
    # The caller's W3C trace context, as sent (kernel.tracing reads it).
    traceparent: str | None = None
    # The call's text headers by name (binary `-bin` ones left out); empty for a run another process took over.
    metadata: dict[str, str] = field(default_factory=dict)
    # The durable run a streaming call's operation is: its id, checkpoints and earlier frames (kernel.transport.runs).
    run: DurableRun = field(default_factory=NoRun)
    # (HTTP status, error code) of the answer, once known.
    outcome: tuple[int, str] = (200, "")
    # Response headers (gRPC initial metadata; Envoy turns them into HTTP headers).
    headers: list[tuple[str, str]] = field(default_factory=list)
    # Run after the unit of work commits (e.g. cache invalidation broadcasts).
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    # Called after the commit with the answer; returns the answer to give
    # instead (e.g. one that waited a moment for durable work the call
    # enqueued) or raises an ApiError; an Idempotency-Key replays what it
    # answers.
    finish: Callable[[Message], Message] | None = None
    # The HTTP status and headers of a successful answer (see respond()).
    status: int | None = None
    http_headers: list[tuple[str, str]] = field(default_factory=list)
    # The id of a resource the call made under another's path (a fork: its request's id is the parent's). The
    # audit entry keeps the request's id and adds this as `details.createdId`, so the audit log names what each
    # user created (privacy: kernel.data.audit_repository.created_resources).
    created_id: str = ""

    def respond(self, status: int | None = None, **headers: str) -> None:
        """Set the HTTP status and extra HTTP headers of a successful answer
        (`respond(201, Location=..., ETag=...)`; underscores become dashes).
        They reach the client only if the call succeeds; errors carry their own."""
        if status is not None:
            self.status = status
        self.http_headers += [(name.replace("_", "-").lower(), value) for name, value in headers.items()]

    def __post_init__(self, uow: UnitOfWork) -> None:
        self._uow = uow

    @property
    def work(self) -> Work:
        """The call's unit of work as its services take it: repositories bound to it, never its connection
        (kernel.data.work)."""
        return self._uow.work

    @property
    def caller(self) -> Principal:
        """The authenticated principal: servicers run only after authentication."""
        if self.principal is None:
            raise RuntimeError("no authenticated principal in this request context")
        return self.principal


def unit_of_work(ctx: RequestContext) -> UnitOfWork:
    """The call's unit of work, for the kernel's stages (its connection, commit, close); not in the door: a servicer
    holds `ctx.work`."""
    return ctx._uow


def reroute(ctx: RequestContext, uow: UnitOfWork) -> None:
    """The call's unit of work from now on (the replica stage's: a read routed to a replica)."""
    ctx._uow = uow
