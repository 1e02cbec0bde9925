"""The ports a domain module may implement for the kernel (`Module`'s hooks), each a small
Protocol: the kernel calls them with typed arguments (the unit of work as a `Work`: kernel.data.work) and never names the module behind them.

A port is a plain function (or any callable) of these arguments; `module.py` wires a domain's
function to it (`usage_period=<its function>`)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from persona_service.kernel.json_values import JSONObject  # one JSON object (a row of a privacy export)

if TYPE_CHECKING:
    from persona_service.kernel.data.personal_data import Subject
    from persona_service.kernel.data.work import Work
    from persona_service.kernel.principal import Principal



class ConfigLevel(Protocol):
    """May this caller address config at this level for `subject_id` (a config level a module owns
    beyond org and workspace, e.g. one persona's)? In a writing transaction the subject is held (it cannot go
    while its setting is written), unless `early`: a first look for the answer's precedence, which the write
    asks again, held, once it has locked the setting (the lock order: docs/concurrency.md)."""

    def __call__(self, work: Work, principal: Principal, subject_id: str, early: bool, /) -> bool: ...


class ReviewResolver(Protocol):
    """What resolving a moderation review item does to a subject the module owns
    (`decision`: "approve" or "reject"), in the caller's unit of work."""

    def __call__(self, work: Work, subject_id: str, decision: str, /) -> None: ...


class PersonalDataExport(Protocol):
    """What the module holds about one user: {table name: JSON rows in lazy batches} (privacy exports)."""

    def __call__(self, work: Work, subject: Subject, /) -> dict[str, Iterable[list[JSONObject]]]: ...


class PersonalDataEraser(Protocol):
    """Erase what the module holds about one user (right to erasure): {what was done: how many}."""

    def __call__(self, work: Work, subject: Subject, now: datetime, /) -> dict[str, int]: ...


class PersonalDataLock(Protocol):
    """Lock what the module's erasure of one user changes and other writes lock before the user's memberships
    (SCIM: the groups the user is in, then the user), before the erasure locks those memberships: the erasure then
    takes its locks in the order every other write does, and never waits on one of them in a cycle."""

    def __call__(self, work: Work, subject: Subject, /) -> None: ...


class LimitOverrides(Protocol):
    """An organization's overrides of its plan's limits: {Limits field: value}."""

    def __call__(self, work: Work, org_id: str, /) -> dict[str, float]: ...


class UsagePeriod(Protocol):
    """The organization's period holding `now` that its monthly quotas count in, as (start, end),
    or None (they then follow the calendar month in UTC)."""

    def __call__(self, work: Work, org_id: str, now: datetime, /) -> tuple[datetime, datetime] | None: ...


class OrganizationOpener(Protocol):
    """What the module opens for a new organization (`org_id` on `plan`, at `now`), in the unit of work that makes
    it: rows every organization has from its first moment (billing's subscription), so that no read has to write
    them. Called once per organization, by the organization's onboarding (`Modules.organization_openers`)."""

    def __call__(self, work: Work, org_id: str, plan: str, now: datetime, /) -> None: ...


class ModuleHooks(Protocol):
    """What a job, a task or a servicer reads of the assembled modules (kernel.module's
    `Modules` is one, a module's `DeclaredHooks` another): the ports they declared. Typed by this Protocol, not by
    `Modules`, so that the Runtime and ServicerDeps that modules are handed do not import the module that declares
    them."""

    @property
    def personal_data(self) -> Sequence[PersonalDataExport]: ...

    @property
    def erasers(self) -> Sequence[PersonalDataEraser]: ...

    @property
    def erasure_locks(self) -> Sequence[PersonalDataLock]: ...

    @property
    def review_resolvers(self) -> Mapping[str, ReviewResolver]: ...


class Need(enum.Enum):
    """A capability over the other modules' ports that a module declares it needs (`Module.needs`): its servicers
    are handed that one (a `ModuleHooks` attribute of the same name) and no other."""

    PERSONAL_DATA = "personal_data"  # every module's part of a privacy export
    ERASERS = "erasers"  # every module's erasure of one user, in the lock order
    ERASURE_LOCKS = "erasure_locks"  # what those erasures lock first
    REVIEW_RESOLVERS = "review_resolvers"  # subject type -> what resolving a moderation review does to it


class UndeclaredNeed(AttributeError):
    """A servicer read a capability its module did not declare (`Module.needs`)."""


class DeclaredHooks:
    """What one module's servicers read of the modules' ports (`ServicerDeps.modules`): the capabilities it
    declared (`Module.needs`), read-only; reading another raises `UndeclaredNeed`, at startup for a servicer that
    takes it when built (the servicers here do), else at its first call (tests/test_architecture.py also finds
    an undeclared read in a domain's source)."""

    personal_data: Sequence[PersonalDataExport]
    erasers: Sequence[PersonalDataEraser]
    erasure_locks: Sequence[PersonalDataLock]
    review_resolvers: Mapping[str, ReviewResolver]
    __slots__ = ("_module", *(need.value for need in Need))

    def __init__(self, module: str, granted: Mapping[Need, Sequence[object] | Mapping[str, object]]) -> None:
        object.__setattr__(self, "_module", module)
        for need, value in granted.items():  # copies: a servicer cannot change what another module is handed
            held = MappingProxyType(dict(value)) if isinstance(value, Mapping) else tuple(value)
            object.__setattr__(self, need.value, held)

    def __getattr__(self, name: str) -> object:  # only for an attribute not set: a need not declared
        if name in Need._value2member_map_:
            raise UndeclaredNeed(f"module {self._module!r} reads {name} without declaring it "
                                 f"(Module.needs=frozenset({{Need.{Need(name).name}}}))")
        raise AttributeError(name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        held = [need.value for need in Need if hasattr(self, need.value)]
        return f"DeclaredHooks({self._module!r}, {held})"
