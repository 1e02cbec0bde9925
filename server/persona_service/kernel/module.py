"""What a domain module declares, and how the kernel assembles the modules.

A module is a folder (`persona_service/<domain>/`) whose `module.py` exposes
one `Module`. The registry (`persona_service/registry.py`) lists the modules;
the server, the background jobs and tasks, the CLI, the id prefixes, the outbox's event
types, the config keys, the endpoint caps, the settings sections and the
migrations are assembled from that list. The kernel never imports a module: modules are handed to it.
"""

from __future__ import annotations

import importlib
import pathlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from persona_service.kernel import ids
from persona_service.kernel.command import Command as Command  # re-exported: modules declare commands with it
from persona_service.kernel.config_keys import ConfigKey, install_config_keys
from persona_service.kernel.data.aggregates import first_lock_of
from persona_service.kernel.ports import (
    ConfigLevel,
    DeclaredHooks,
    LimitOverrides,
    Need,
    OrganizationOpener,
    PersonalDataEraser,
    PersonalDataExport,
    PersonalDataLock,
    ReviewResolver,
    UsagePeriod,
)
from persona_service.kernel.principal import Scope, install_scopes
from persona_service.kernel.settings import InvalidSetting, Settings, env_names, read
from persona_service.kernel.transport.limits.plans import EndpointCap, PlanLimit, install_caps, install_plan_limits
from persona_service.kernel.transport.outbox import EVENT_TYPES
from persona_service.kernel.transport.tasks import TaskKind

if TYPE_CHECKING:
    import grpc
    from pydantic_settings import BaseSettings

    from persona_service.kernel.resources import DeclaredResource, Runtime, ServicerDeps
    from persona_service.kernel.transport.auth import CredentialStore
    from persona_service.kernel.transport.errors import ErrorShape


@dataclass(frozen=True)
class ServiceBinding:
    """One gRPC service of a module: its full proto name, how to build the
    servicer from what servicers may use (`ServicerDeps`, never the App), and
    the generated registration function. A servicer is a plain class with one
    method per RPC, `Method(self, request, ctx: RequestContext)`: grpcio finds
    the methods by name, and the pipeline calls each with its call's context
    in place of gRPC's (kernel.transport.pipeline)."""

    name: str  # "persona.v1.PersonaService"
    servicer: Callable[[ServicerDeps], object]
    register: Callable[[Any, grpc.Server], None]


@dataclass(frozen=True)
class Job:
    """A periodic background job run in every server process (jobs must be idempotent)."""

    name: str
    every_seconds: float
    run: Callable[[Runtime], int]  # returns how many things it did, for the log


@dataclass(frozen=True)
class Process:
    """A long-running process kind `persona-service up` starts (and supervises)
    besides the gRPC servers, e.g. the webhook delivery worker."""

    name: str
    command: str  # the Command that runs it
    count: Callable[[], int] = lambda: 1
    # PostgreSQL connections one process of this kind holds at most (its pool).
    db_connections: Callable[[], int] = lambda: 2


@dataclass(frozen=True)
class Module:
    name: str
    services: Sequence[ServiceBinding] = ()
    # id kind -> prefix (`org` -> `org_…`).
    id_prefixes: Mapping[str, str] = field(default_factory=dict)
    # Event types this module emits (each one of the proto's EventType values).
    event_types: frozenset[str] = frozenset()
    config_keys: Sequence[ConfigKey] = ()
    # Scopes this module adds to the six (kernel.principal.Scope).
    scopes: Sequence[Scope] = ()
    # Config levels this module owns beyond org/workspace: level -> its check.
    config_levels: Mapping[str, ConfigLevel] = field(default_factory=dict)
    endpoint_caps: Sequence[EndpointCap] = ()
    # Limits of this module's own, per plan (kernel.transport.limits.plans.PlanLimit).
    plan_limits: Sequence[PlanLimit] = ()
    jobs: Sequence[Job] = ()
    # What resolving a moderation review item does to a subject this module owns: subject type -> resolver.
    review_resolvers: Mapping[str, ReviewResolver] = field(default_factory=dict)
    # What this module holds about one user, for privacy exports (lazy batches: kernel.data.personal_data).
    personal_data: PersonalDataExport | None = None
    # Erase what this module holds about one user (right to erasure).
    erase_personal_data: PersonalDataEraser | None = None
    # What that erasure locks first, before the person's memberships (the lock order other writes take).
    lock_personal_data: PersonalDataLock | None = None
    # What this module opens for each new organization in the unit of work that makes it (billing: its
    # subscription), so that every organization has it from its first moment and no read writes it.
    open_organization: OrganizationOpener | None = None
    # What this module's servicers read of the other modules' ports (`ServicerDeps.modules`): only these
    # (kernel.ports.Need: the exporters, the erasers, their locks, the review resolvers).
    needs: frozenset[Need] = frozenset()
    # Kinds of durable background work (kernel.transport.tasks) this module enqueues.
    tasks: Sequence[TaskKind[Runtime]] = ()
    commands: Sequence[Command] = ()
    processes: Sequence[Process] = ()
    # Alembic version directory of the module's own migrations, if any.
    migrations: pathlib.Path | None = None
    # Kernel ports this module implements (at most one module each).
    credentials: Callable[[], CredentialStore] | None = None
    limit_overrides: LimitOverrides | None = None
    # The period an organization's monthly quotas count in (a billing period).
    usage_period: UsagePeriod | None = None
    # The module's settings section (a kernel.settings.Section), read with kernel.settings.load().
    settings: type[BaseSettings] | None = None
    # The long-lived objects its code opens once per process (`deps.resources.get`, `runtime.resources.get`):
    # only declared ones open (kernel.resources.Resources).
    resources: Sequence[DeclaredResource] = ()
    # HTTP path prefixes whose clients send query parameters of their own
    # (SCIM's `aadOptscim062020`): the edge ignores unknown ones there
    # instead of answering 400.
    lenient_query_prefixes: Sequence[str] = ()
    # HTTP path prefixes whose replies from the edge itself (no such path, a
    # method the path does not take, a malformed body) use an error shape
    # (options.ErrorShape value) instead of the envelope: SCIM clients expect
    # SCIM's error schema from every path under their base.
    error_shape_prefixes: Mapping[str, int] = field(default_factory=dict)
    # The error shapes this module renders (options.ErrorShape value ->
    # kernel.transport.errors.ErrorShape), for its RPCs and path prefixes.
    error_shapes: Mapping[int, ErrorShape] = field(default_factory=dict)
    # The HTTP statuses a shape answers instead of the catalogue's (options.ErrorShape value -> {catalogue
    # status: the shape's}): OpenAI answers 400 where the envelope says 422.
    error_shape_statuses: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    # A module outside proto/ (loaded with PERSONA_EXTRA_MODULES): the
    # FileDescriptorSet of its protos, imports included, which the edge adds
    # to gen/descriptor.binpb.
    descriptors: pathlib.Path | None = None


class Modules:
    """The assembled modules: checked once, then read by the kernel. The
    registry's list is followed by the extra modules PERSONA_EXTRA_MODULES
    names (deployment-specific domains; the tests' edge probe)."""

    def __init__(self, modules: Sequence[Module]):
        self.all = (*modules, *extra_modules())
        names = [m.name for m in self.all]
        _unique("module", names)
        _unique("gRPC service", [s.name for m in self.all for s in m.services])
        for module in self.all:
            unknown = module.event_types - EVENT_TYPES
            if unknown:
                raise RuntimeError(f"module {module.name} declares unknown event types {sorted(unknown)}")
            ids.register(module.id_prefixes)
        install_config_keys([k for m in self.all for k in m.config_keys],
                            {level: check for m in self.all for level, check in m.config_levels.items()})
        install_caps([c for m in self.all for c in m.endpoint_caps])
        _unique("plan limit", [limit.name for m in self.all for limit in m.plan_limits])
        install_plan_limits([limit for m in self.all for limit in m.plan_limits])
        _unique("scope", [s.name for m in self.all for s in m.scopes])
        install_scopes([s for m in self.all for s in m.scopes])
        self.services = [s for m in self.all for s in m.services]
        self.service_names = [s.name for s in self.services]
        self.jobs = [j for m in self.all for j in m.jobs]
        _unique("task kind", [t.name for m in self.all for t in m.tasks])
        self.tasks = {t.name: t for m in self.all for t in m.tasks}
        _unique("review subject type", [k for m in self.all for k in m.review_resolvers])
        self.review_resolvers = {k: v for m in self.all for k, v in m.review_resolvers.items()}
        self.personal_data = [m.personal_data for m in self.all if m.personal_data is not None]
        # In the lock order of the aggregates each erases (by the first its domain declared): the erasure takes their
        # roots as every other write does (docs/concurrency.md "The lock order"; the lock guard checks it).
        self.erasers = [m.erase_personal_data for m in sorted(self.all, key=lambda m: first_lock_of(m.name))
                        if m.erase_personal_data is not None]
        self.erasure_locks = [m.lock_personal_data for m in self.all if m.lock_personal_data is not None]
        self.organization_openers = [m.open_organization for m in self.all if m.open_organization is not None]
        # What each module's servicers, jobs and tasks are handed of those four (its declared needs), and which
        # module serves what.
        self.declared = {m.name: DeclaredHooks(m.name, {need: getattr(self, need.value) for need in m.needs})
                         for m in self.all}
        self.owner = {s.name: m.name for m in self.all for s in m.services}
        # Which module's jobs and task kinds these are: their Runtime holds that module's needs.
        self.job_owner = {j.name: m.name for m in self.all for j in m.jobs}
        self.task_owner = {t.name: m.name for m in self.all for t in m.tasks}
        self.commands = [c for m in self.all for c in m.commands]
        self.processes = [p for m in self.all for p in m.processes]
        self.migrations = [m.migrations for m in self.all if m.migrations is not None]
        self.settings_sections: list[type[BaseSettings]] = [m.settings for m in self.all if m.settings is not None]
        self.resources = [r for m in self.all for r in m.resources]
        _unique("resource", [r.name for r in self.resources])
        sections: list[type[BaseSettings]] = [Settings, *self.settings_sections]
        _unique("setting", [name for s in sections for name in env_names(s)])
        self.credentials = _one("credentials", [m.credentials for m in self.all if m.credentials])
        self.lenient_query_prefixes = [p for m in self.all for p in m.lenient_query_prefixes]
        self.error_shape_prefixes = {p: shape for m in self.all for p, shape in m.error_shape_prefixes.items()}
        _unique("error shape", [str(shape) for m in self.all for shape in m.error_shapes])
        # (gRPC's transport loads with the modules' servicers, not with every CLI command.)
        from persona_service.kernel.transport.errors import install_error_shapes

        install_error_shapes({shape: render for m in self.all for shape, render in m.error_shapes.items()},
                             {shape: dict(st) for m in self.all for shape, st in m.error_shape_statuses.items()})
        self.descriptors = [m.descriptors for m in self.all if m.descriptors is not None]
        self.limit_overrides = _one("limit_overrides", [m.limit_overrides for m in self.all if m.limit_overrides])
        self.usage_period = _one("usage_period", [m.usage_period for m in self.all if m.usage_period])


def extra_modules() -> list[Module]:
    """The modules PERSONA_EXTRA_MODULES names. A malformed value is left to
    the settings check, which reports it as one line before any command runs."""
    try:
        refs = read(Settings).extra_modules
    except InvalidSetting:
        return []
    found = []
    for ref in refs:
        path, _, name = ref.partition(":")
        module = getattr(importlib.import_module(path), name)
        if not isinstance(module, Module):
            raise RuntimeError(f"PERSONA_EXTRA_MODULES: {ref} is not a Module")
        found.append(module)
    return found


def _unique(what: str, values: list[str]) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise RuntimeError(f"{what} {value!r} is declared twice")
        seen.add(value)


T = TypeVar("T")


def _one(port: str, providers: list[T]) -> T | None:
    if len(providers) > 1:
        raise RuntimeError(f"more than one module implements the {port} port")
    return providers[0] if providers else None
