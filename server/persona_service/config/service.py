"""Typed configuration items per organization and workspace.

Every key is declared here with its type, default and the levels it may be
set at; the effective value for a workspace is its own setting, else the
organization's, else the default. The drift-detection keys may also be set
per persona (spec 1.0.4): for that persona its own setting comes first. Rate-limit keys are organization-level,
Enterprise-only and Owner-only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from persona_service.config.repository import (
    ORG_LEVEL,
    PERSONA_LEVEL_PREFIX,
    ConfigRepository,
    ItemRecord,
    persona_level,
)
from persona_service.kernel.api import (
    CONFIG_KEYS,
    LEVEL_CHECKS,
    ConfigKey,
    CursorCodec,
    Forbidden,
    NotFound,
    Principal,
    ValidationFailed,
    Violation,
    Work,
    cursor_page,
    override_maximum,
)

RATE_LIMIT_PREFIX = "api.rate_limit."


def _limit(name: str, type_: str = "integer", minimum: float = 1) -> ConfigKey:
    return ConfigKey(
        RATE_LIMIT_PREFIX + name, type_, None, minimum=minimum, levels=("org",), enterprise_only=True, owner_only=True
    )


# The Enterprise rate-limit keys (this module implements the kernel's
# limit-overrides port); other modules declare their own keys.
RATE_LIMIT_KEYS = (
    _limit("requests_per_minute"),
    _limit("requests_per_day"),
    _limit("concurrent_generations"),
    _limit("concurrent_streams"),
    _limit("generations_per_month"),
    _limit("images_per_month"),
    _limit("cap_multiplier", "number", 0.01),
)


def _bounded(spec: ConfigKey, ceiling: float) -> ConfigKey:
    """A rate-limit key with its maximum: what the operator lets an
    organization raise that limit to (`ceiling`, PERSONA_LIMIT_OVERRIDE_CEILING)."""
    if not spec.key.startswith(RATE_LIMIT_PREFIX):
        return spec
    return replace(spec, maximum=override_maximum(spec.key[len(RATE_LIMIT_PREFIX):], ceiling))


@dataclass(frozen=True)
class Effective:
    spec: ConfigKey
    value: object  # JSON, of the key's declared type
    source: str  # persona | workspace | org | default
    updated_at: datetime | None = None  # None: the default


def _declared(spec: ConfigKey, reader: str, *types: str) -> None:
    """A reader of another type than the key's declaration (`flag` of a number key) is a mistake in the caller's
    code; a stored value of another type cannot be (every write is checked by its key)."""
    if spec.type not in types:
        raise TypeError(f"{spec.key} is declared {spec.type}, not read as a {reader}")


def _number(spec: ConfigKey, value: object) -> float:
    _declared(spec, "number", "number", "integer")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{spec.key} holds {value!r}, not a number")
    return float(value)


def _flag(spec: ConfigKey, value: object) -> bool:
    _declared(spec, "flag", "boolean")
    if not isinstance(value, bool):
        raise TypeError(f"{spec.key} holds {value!r}, not a boolean")
    return value


def _choice(spec: ConfigKey, value: object) -> str:
    _declared(spec, "choice", "enum")
    if not isinstance(value, str):
        raise TypeError(f"{spec.key} holds {value!r}, not one of its choices")
    return value


def _level_of(workspace_id: str) -> str:
    if workspace_id == ORG_LEVEL:
        return "org"
    return "persona" if workspace_id.startswith(PERSONA_LEVEL_PREFIX) else "workspace"


class ConfigService:
    def __init__(self, work: Work, cursors: CursorCodec | None = None) -> None:
        self.work = work
        self._repo = work.of(ConfigRepository)
        self.cursors = cursors

    @staticmethod
    def spec(key: str) -> ConfigKey:
        spec = CONFIG_KEYS.get(key)
        if spec is None:
            raise NotFound("configuration key", {"key": key})
        return spec

    def page(self, principal: Principal, prefix: str, limit: int, cursor: str) -> tuple[list[Effective], str]:
        """One page of the workspace's effective values, keyset-paginated on the key."""
        items = self.effective(principal, prefix)
        return cursor_page(
            self.cursors, f"config:{principal.workspace_id}:{prefix}", limit, cursor,
            lambda n, after: [i for i in items if after is None or i.spec.key > after][:n],
            lambda item: [item.spec.key], lambda position: str(position[0]),
        )

    def effective(self, principal: Principal, prefix: str = "", persona_id: str = "") -> list[Effective]:
        """Effective values for the caller's workspace, or for one of its
        personas (persona → workspace → org → default)."""
        rows = self._repo.settings(principal.org_id, principal.workspace_id, persona_id=persona_id)
        return [self._resolved(CONFIG_KEYS[key], rows, principal) for key in sorted(CONFIG_KEYS)
                if key.startswith(prefix)]

    def _resolved(self, spec: ConfigKey, rows: list[ItemRecord], principal: Principal) -> Effective:
        """`spec`'s effective value among `rows` (the levels' settings): persona → workspace → org → default."""
        by_level = {_level_of(r.workspace_id): r for r in rows if r.key == spec.key}
        row = by_level.get("persona") or by_level.get("workspace") or by_level.get("org")
        if row is not None:
            return Effective(spec, row.value, _level_of(row.workspace_id), row.updated_at)
        return Effective(spec, self._default(spec, principal), "default")

    def get(self, principal: Principal, key: str, persona_id: str = "", *, check_persona: bool = True) -> Effective:
        self.spec(key)
        if persona_id and check_persona:
            self._persona(principal, persona_id)
        return next(item for item in self.effective(principal, key, persona_id) if item.spec.key == key)

    def value(self, principal: Principal, key: str, persona_id: str = "") -> object:
        """The effective value (for a persona already known to be the caller's): its rows alone read (a chat
        reply reads one or two keys, not every row of the organization's and workspace's settings). Other
        modules read it by its declared type: `number`, `flag`, `choice`."""
        spec = self.spec(key)
        rows = self._repo.key_settings(principal.org_id, principal.workspace_id, key, persona_id)
        return self._resolved(spec, rows, principal).value

    def number(self, principal: Principal, key: str, persona_id: str = "") -> float:
        """A `number` or `integer` key's effective value."""
        return _number(self.spec(key), self.value(principal, key, persona_id))

    def flag(self, principal: Principal, key: str, persona_id: str = "") -> bool:
        """A `boolean` key's effective value."""
        return _flag(self.spec(key), self.value(principal, key, persona_id))

    def choice(self, principal: Principal, key: str, persona_id: str = "") -> str:
        """An `enum` key's effective value."""
        return _choice(self.spec(key), self.value(principal, key, persona_id))

    def update(self, principal: Principal, key: str, value: object, level: str, persona_id: str = "", *,
               override_ceiling: float) -> Effective:
        spec, level = self._writable(principal, key, level, persona_id)
        violation = _bounded(spec, override_ceiling).check(value)
        if violation is not None:
            raise ValidationFailed([violation])
        level_id = self._level_id(principal, level, persona_id)
        self._repo.upsert(principal.org_id, level_id, key, spec.normalize(value), principal.credential_id)
        self._held(principal, level, persona_id)
        return self.get(principal, key, persona_id if level == "persona" else "", check_persona=False)

    def delete(self, principal: Principal, key: str, level: str, persona_id: str = "") -> Effective:
        _, level = self._writable(principal, key, level, persona_id)
        self._repo.delete(principal.org_id, self._level_id(principal, level, persona_id), key)
        self._held(principal, level, persona_id)
        return self.get(principal, key, persona_id if level == "persona" else "", check_persona=False)

    def org_flag(self, org_id: str, key: str) -> bool:
        """An organization-level `boolean` key's value (or its default), for work that runs without a caller."""
        spec = self.spec(key)
        found = [value for name, value in self._repo.org_settings_with_prefix(org_id, key) if name == key]
        return _flag(spec, found[0] if found else spec.default)

    def rate_limit_overrides(self, org_id: str) -> dict[str, float]:
        """Enterprise limit overrides, by Limits field name."""
        return {k[len(RATE_LIMIT_PREFIX):]: _number(self.spec(k), v)
                for k, v in self._repo.org_settings_with_prefix(org_id, RATE_LIMIT_PREFIX)}

    # --- rules ------------------------------------------------------------------

    def _writable(self, principal: Principal, key: str, level: str, persona_id: str = "") -> tuple[ConfigKey, str]:
        spec = self.spec(key)
        level = level or ("persona" if persona_id else spec.levels[0])
        if level not in spec.levels:
            raise ValidationFailed([Violation("level", "one_of", level, {"oneOf": list(spec.levels)})])
        if level == "persona":
            if not persona_id:
                raise ValidationFailed([Violation("personaId", "required", persona_id, {"requiredWhen": "level=persona"})])
            # A first look (its 404 before the checks below); the write locks the setting's row, then holds the
            # persona and asks again (`_held`): config_item before persona (docs/concurrency.md "The lock order").
            self._persona(principal, persona_id, early=True)
        elif persona_id:
            raise ValidationFailed([Violation("personaId", "not_allowed", persona_id, {"onlyWhen": "level=persona"})])
        if spec.owner_only and principal.role != "owner":
            raise Forbidden(f"Only the Owner role may change `{key}`.", {"requiredRole": "owner"})
        if spec.enterprise_only and principal.plan != "enterprise":
            raise Forbidden("Custom rate limits are available on the Enterprise plan only.", {"requiredPlan": "enterprise"})
        return spec, level

    def _persona(self, principal: Principal, persona_id: str, *, early: bool = False) -> None:
        """The persona must be one of the caller's workspace (else 404); the
        module owning the `persona` level says so (`early`: read as is, see ConfigLevel)."""
        check = LEVEL_CHECKS.get("persona")
        if check is None or not check(self.work, principal, persona_id, early):
            raise NotFound("persona")

    def _held(self, principal: Principal, level: str, persona_id: str) -> None:
        """A persona-level write holds its persona after its setting's row (config before personas in the
        lock order), asking again: a persona deleted since the first look is a 404, the write undone."""
        if level == "persona":
            self._persona(principal, persona_id)

    @staticmethod
    def _level_id(principal: Principal, level: str, persona_id: str = "") -> str:
        if level == "persona":
            return persona_level(persona_id)
        return ORG_LEVEL if level == "org" else principal.workspace_id

    @staticmethod
    def _default(spec: ConfigKey, principal: Principal) -> object:
        if spec.key.startswith(RATE_LIMIT_PREFIX):
            from persona_service.kernel.api import PLAN_LIMITS

            return PLAN_LIMITS[principal.plan].value(spec.key[len(RATE_LIMIT_PREFIX):])
        return spec.default
