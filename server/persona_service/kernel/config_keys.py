"""Typed configuration keys: each module declares the keys it reads
(`Module.config_keys`) and the extra levels it owns (`Module.config_levels`,
e.g. `persona`); the config module stores and serves them. Installed once
when the registry is assembled."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from persona_service.kernel.errors import Violation
from persona_service.kernel.ports import ConfigLevel

# A key's default: a JSON scalar of its declared type, or None where the default is not the key's own (a rate
# limit's is the caller's plan's).
ConfigDefault = bool | int | float | str | None


@dataclass(frozen=True)
class ConfigKey:
    key: str
    type: str  # enum | number | integer | boolean
    default: ConfigDefault
    allowed: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    levels: tuple[str, ...] = ("workspace", "org")
    enterprise_only: bool = False
    owner_only: bool = False

    def check(self, value: object) -> Violation | None:
        """None if `value` (the caller's JSON) is one this key takes, else what it breaks."""
        expected: dict[str, object]
        if self.type == "boolean":
            return None if isinstance(value, bool) else Violation("value", "type", value, {"type": "boolean"})
        if self.type == "enum":
            if value in self.allowed:
                return None
            expected = {"oneOf": list(self.allowed)}
            code = "one_of"
        else:
            number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
            if self.type == "integer" and isinstance(number, float) and not number.is_integer():
                number = None
            if number is not None and (self.minimum is None or number >= self.minimum) and (
                self.maximum is None or number <= self.maximum
            ):
                return None
            expected = {"type": self.type, "minimum": self.minimum, "maximum": self.maximum}
            code = "range" if number is not None else "type"
        return Violation("value", code, value, expected)

    def normalize(self, value: object) -> object:
        """A checked value as it is stored: an integer key's as an int (JSON's numbers arrive as doubles)."""
        return int(value) if self.type == "integer" and isinstance(value, float) else value


# key -> ConfigKey, and level -> check that the caller may address that
# subject (e.g. the persona is in the caller's workspace), both assembled
# from the registry.
CONFIG_KEYS: dict[str, ConfigKey] = {}
LEVEL_CHECKS: dict[str, ConfigLevel] = {}


def install_config_keys(keys: Iterable[ConfigKey], levels: Mapping[str, ConfigLevel]) -> None:
    for key in keys:
        if CONFIG_KEYS.get(key.key, key) != key:
            raise RuntimeError(f"config key {key.key!r} is declared twice")
        CONFIG_KEYS[key.key] = key
    for level, check in levels.items():
        if LEVEL_CHECKS.get(level, check) is not check:
            raise RuntimeError(f"config level {level!r} is declared twice")
        LEVEL_CHECKS[level] = check
