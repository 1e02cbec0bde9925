"""What the request pipeline and its stages read of the process that serves them (process.app's
App is one), as a Protocol: the transport types its host here rather than importing the process part,
which builds the transport's pieces (no loop between the kernel's parts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from persona_service.kernel.data.replicas import ReplicaRouter
    from persona_service.kernel.settings import Settings
    from persona_service.kernel.transport.audit import AuditEntry, FailureTally
    from persona_service.kernel.transport.auth import Authenticator
    from persona_service.kernel.transport.idempotency import Idempotency
    from persona_service.kernel.transport.limits.limiter import RateLimiter
    from persona_service.kernel.transport.limits.resolver import LimitsResolver
    from persona_service.kernel.transport.runs import Runs


class PipelineHost(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def replicas(self) -> ReplicaRouter | None: ...

    @property
    def authenticator(self) -> Authenticator: ...

    @property
    def failed_auth(self) -> FailureTally: ...

    @property
    def limiter(self) -> RateLimiter: ...

    @property
    def limits(self) -> LimitsResolver: ...

    @property
    def idempotency(self) -> Idempotency: ...

    @property
    def runs(self) -> Runs: ...

    def audit(self, entries: list[AuditEntry]) -> int: ...
