"""The race hunt's short form (scripts/race_hunt.py, one round): every write
operation the protos declare idempotent, through Envoy, alone, then twice at
once with one Idempotency-Key and with two, on a fresh resource each time.
No 5xx, one execution per key, the events of one call each once, two keys
answered as one after the other; an update at once with its delete answers
as one of the two serial orders. Races are met by chance here (the tests
beside each fix meet them at a held lock); scripts/race_hunt.py --rounds N
hunts longer."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from sqlalchemy import text
from support import ROOT


def _race_hunt():
    spec = importlib.util.spec_from_file_location("race_hunt", ROOT / "scripts" / "race_hunt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["race_hunt"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


race_hunt = _race_hunt()


@pytest.fixture(scope="module")
def world(http, engine, tenants):
    org = tenants(plan="enterprise")

    def events() -> int:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM events WHERE org_id = :o"), {"o": org.org_id}).scalar_one()

    return race_hunt.World(http, org.api_key, tenants(plan="enterprise", platform_admin=True).api_key,
                           tenants(plan="team").api_key, events=events, throwaway=lambda: tenants().api_key)


def test_the_table_is_every_idempotent_write():
    ops = {op.operation_id for op in race_hunt.operations()}
    assert {"CreatePersona", "CreateScimUser", "CreateScimGroup", "UpdateWebhookEndpoint", "PurchaseListing",
            "ChangeSubscription", "PatchScimGroup", "DeleteScimUser"} <= ops
    assert len(ops) >= 50


@pytest.mark.parametrize("op", race_hunt.operations(), ids=lambda op: op.operation_id)
def test_two_at_once_answer_as_one_after_the_other(world, op):
    findings = race_hunt.hunt_one(world, op)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("pair", race_hunt.against_delete(race_hunt.operations()),
                         ids=lambda pair: f"{pair[0].operation_id}-{pair[1].operation_id}")
def test_an_update_at_once_with_its_delete_answers_as_one_after_the_other(world, pair):
    findings = race_hunt.hunt_against_delete(world, *pair)
    assert not findings, "\n".join(map(str, findings))
