"""A configuration item's writes at once answer as one serial order would (tests/oracle.py), through Envoy: two
updates of a workspace-level setting to different values and its deletion, each pair fired together behind a
barrier and compared with both serial orders (the effective value and the level it comes from)."""

from __future__ import annotations

from dataclasses import dataclass

from oracle import Op, body, fixture_body, new_org, org_pair_test, org_table, uncovered

KEY = "engine.pipeline.drift_detection.threshold"


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]


def _fixture(http, tenants) -> Fixture:
    # State: a workspace-level value (the state reads the value and its level; the generator's level is `org`).
    made = fixture_body("UpdateConfigItem", state={"value": 0.5, "level": "workspace"})
    return Fixture(new_org(http, tenants, "team", "PUT", f"/v1/config/{KEY}", made)[0])


def _ops(http) -> list[Op]:
    # Distinguishing: the value and its level (the state reads both; the two updates differ by the value).
    def update(value: float):
        return lambda f: http.put(f"/v1/config/{KEY}", json=body(
            "UpdateConfigItem", distinguishing={"value": value, "level": "workspace"}), headers=f.auth)

    return [Op("update-0.6", update(0.6), "UpdateConfigItem"),
            Op("update-0.7", update(0.7), "UpdateConfigItem"),
            Op("delete", lambda f: http.delete(f"/v1/config/{KEY}", params={"level": "workspace"}, headers=f.auth),
               "DeleteConfigItem")]


def _state(http, f: Fixture):
    item = http.get(f"/v1/config/{KEY}", headers=f.auth).json()
    return item["value"], item["source"]


_table = org_table("a workspace-level setting", _fixture, _state, _ops)
test_two_writes_at_once_answer_as_one_serial_order = org_pair_test(_table)


def test_the_oracle_tries_every_write_of_a_setting():
    assert uncovered("ConfigService", [_table(None, None)]) == set()
