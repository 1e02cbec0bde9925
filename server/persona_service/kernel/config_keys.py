"""Typed configuration keys: each module declares the keys it reads
(`Module.config_keys`) and the extra levels it owns (`Module.config_levels`,
e.g. `persona`); the config module stores and serves them. Installed once
when the registry is assembled."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from persona_service.kernel.errors import Violation


@dataclass(frozen=True)
class ConfigKey:
    key: str
    type: str  # enum | number | integer | boolean
    default: Any
    allowed: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    levels: tuple[str, ...] = ("workspace", "org")
    enterprise_only: bool = False
    owner_only: bool = False

    def check(self, value: Any) -> Violation | None:
        expected: dict[str, Any]
        if self.type == "boolean":
            return None if isinstance(value, bool) else Violation("value", "type", value, {"type": "boolean"})
        if self.type == "enum":
            if value in self.allowed:
                return None
            expected = {"oneOf": list(self.allowed)}
            code = "one_of"
        else:
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if self.type == "integer":
                is_number = is_number and float(value).is_integer()
            in_range = is_number and (self.minimum is None or value >= self.minimum) and (
                self.maximum is None or value <= self.maximum
            )
            if in_range:
                return None
            expected = {"type": self.type, "minimum": self.minimum, "maximum": self.maximum}
            code = "range" if is_number else "type"
        return Violation("value", code, value, expected)

    def normalize(self, value: Any) -> Any:
        return int(value) if self.type == "integer" else value


# key -> ConfigKey, and level -> check that the caller may address that
# subject (e.g. the persona is in the caller's workspace), both assembled
# from the registry.
CONFIG_KEYS: dict[str, ConfigKey] = {}
LEVEL_CHECKS: dict[str, Callable[[Any, Any, str, bool], bool]] = {}


def install_config_keys(keys: Iterable[ConfigKey], levels: Mapping[str, Callable[[Any, Any, str, bool], bool]]) -> None:
    for key in keys:
        if CONFIG_KEYS.get(key.key, key) != key:
            raise RuntimeError(f"config key {key.key!r} is declared twice")
        CONFIG_KEYS[key.key] = key
    for level, check in levels.items():
        if LEVEL_CHECKS.get(level, check) is not check:
            raise RuntimeError(f"config level {level!r} is declared twice")
        LEVEL_CHECKS[level] = check
