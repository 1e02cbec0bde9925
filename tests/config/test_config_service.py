"""ConfigService on a Work with no database (kernel.data.work's `Work.of_records`): its rules (precedence, the
typed readers, who may write what) tested with its repository kept in memory, no stack, servicer nor App."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from persona_service.config.repository import ORG_LEVEL, ConfigRepository, ItemRecord, persona_level
from persona_service.config.service import ConfigService
from persona_service.kernel.data.work import NoDatabase, Work
from persona_service.kernel.errors import Forbidden, ValidationFailed
from persona_service.kernel.principal import Principal

THRESHOLD = "engine.pipeline.drift_detection.threshold"
AT = datetime(2026, 12, 1, tzinfo=UTC)


class MemoryConfig(ConfigRepository):
    """ConfigRepository's reads and writes over a list: what the service decides, without SQL."""

    def __init__(self, rows: list[ItemRecord]) -> None:  # (no connection: nothing here sends SQL)
        self.rows = rows

    def settings(self, org_id: str, workspace_id: str, key: str | None = None, persona_id: str = "") -> list[ItemRecord]:
        levels = {ORG_LEVEL, workspace_id, *([persona_level(persona_id)] if persona_id else [])}
        return [r for r in self.rows if r.workspace_id in levels and key in (None, r.key)]

    def key_settings(self, org_id: str, workspace_id: str, key: str, persona_id: str = "") -> list[ItemRecord]:
        return self.settings(org_id, workspace_id, key, persona_id)

    def org_settings_with_prefix(self, org_id: str, prefix: str) -> list[tuple[str, object]]:
        return [(r.key, r.value) for r in self.rows if r.workspace_id == ORG_LEVEL and r.key.startswith(prefix)]

    def upsert(self, org_id: str, workspace_id: str, key: str, value: object, updated_by: str) -> None:
        self.delete(org_id, workspace_id, key)
        self.rows.append(ItemRecord(key, workspace_id, value, AT))

    def delete(self, org_id: str, workspace_id: str, key: str) -> None:
        self.rows[:] = [r for r in self.rows if (r.workspace_id, r.key) != (workspace_id, key)]


def _caller(role: str = "owner", plan: str = "pro") -> Principal:
    return Principal("api_key", "key_1", "org_1", "ws_1", "usr_1", frozenset(), role, plan, False)


def _service(*rows: ItemRecord) -> tuple[ConfigService, MemoryConfig]:
    repository = MemoryConfig(list(rows))
    return ConfigService(Work.of_records([repository])), repository


def test_the_effective_value_is_the_personas_then_the_workspaces_then_the_organizations_then_the_default():
    service, _ = _service()
    default = service.get(_caller(), THRESHOLD)
    assert default.source == "default"
    service, _ = _service(ItemRecord(THRESHOLD, ORG_LEVEL, 0.5, AT), ItemRecord(THRESHOLD, "ws_1", 0.6, AT),
                          ItemRecord(THRESHOLD, persona_level("p1"), 0.7, AT), ItemRecord(THRESHOLD, "ws_2", 0.9, AT))
    assert service.number(_caller(), THRESHOLD) == 0.6
    assert service.number(_caller(), THRESHOLD, "p1") == 0.7
    assert service.value(_caller(), THRESHOLD, "p2") == 0.6


def test_a_write_is_checked_and_stored_at_its_level():
    service, repository = _service()
    item = service.update(_caller(), THRESHOLD, 0.25, "workspace", override_ceiling=10)
    assert (item.value, item.source) == (0.25, "workspace")
    assert repository.rows == [ItemRecord(THRESHOLD, "ws_1", 0.25, AT)]
    with pytest.raises(ValidationFailed):
        service.update(_caller(), THRESHOLD, 2, "workspace", override_ceiling=10)  # a threshold above 1
    with pytest.raises(ValidationFailed):
        service.update(_caller(), THRESHOLD, 0.5, "nowhere", override_ceiling=10)


def test_rate_limits_are_the_owners_and_enterprises_only():
    service, _ = _service()
    with pytest.raises(Forbidden):
        service.update(_caller(role="admin", plan="enterprise"), "api.rate_limit.requests_per_minute", 100, "org",
                       override_ceiling=10)
    with pytest.raises(Forbidden):
        service.update(_caller(plan="pro"), "api.rate_limit.requests_per_minute", 100, "org", override_ceiling=10)
    service.update(_caller(plan="enterprise"), "api.rate_limit.requests_per_minute", 100, "org", override_ceiling=10)
    assert service.rate_limit_overrides("org_1") == {"requests_per_minute": 100.0}


def test_a_work_without_a_database_answers_only_the_repositories_it_was_given():
    with pytest.raises(NoDatabase):
        ConfigService(Work.of_records([]))
