"""A configuration item's writes at once answer as one serial order would (tests/oracle.py), through Envoy: two
updates of a workspace-level setting to different values and its deletion, each pair fired together behind a
barrier and compared with both serial orders (the effective value and the level it comes from)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair, writes_covered
from persona.v1 import config_pb2

KEY = "engine.pipeline.drift_detection.threshold"


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]


def _fixture(http, tenants) -> Fixture:
    org = tenants(plan="team")
    r = http.put(f"/v1/config/{KEY}", json={"value": 0.5, "level": "workspace"}, headers=org.auth)
    assert r.status_code == 200, r.text
    return Fixture(org.auth)


def _ops(http) -> list[Op]:
    def update(value: float):
        return lambda f: http.put(f"/v1/config/{KEY}", json={"value": value, "level": "workspace"}, headers=f.auth)

    return [Op("update-0.6", update(0.6), "UpdateConfigItem"),
            Op("update-0.7", update(0.7), "UpdateConfigItem"),
            Op("delete", lambda f: http.delete(f"/v1/config/{KEY}", params={"level": "workspace"}, headers=f.auth),
               "DeleteConfigItem")]


def _state(http, f: Fixture):
    item = http.get(f"/v1/config/{KEY}", headers=f.auth).json()
    return item["value"], item["source"]


def _table(http, tenants) -> Table:
    return Table("a workspace-level setting", make=lambda: _fixture(http, tenants), read=lambda f: _state(http, f),
                 ops=_ops(http))


PAIRS = [(a.name, b.name) for a, b in _table(None, None).pairs]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_writes_at_once_answer_as_one_serial_order(http, tenants, a, b):
    table = _table(http, tenants)
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []


def test_the_oracle_tries_every_write_of_a_setting():
    service = config_pb2.DESCRIPTOR.services_by_name["ConfigService"]
    assert writes_covered(service, [_table(None, None)], set()) == set()
