"""The race hunt's short form (scripts/race_hunt.py, one round): every write
operation the protos declare idempotent, through Envoy, alone, then twice at
once with one Idempotency-Key and with two, on a fresh resource each time,
with the inputs scripts/contract_inputs.py builds from the request messages.
The call alone reaches a real resource (no 404, no 422: the generated input
and the aggregate's fixture are right), no 5xx, one execution per key, the
events of one call each once, two keys answered as one after the other; an
update at once with its delete answers as one of the two serial orders; each
other write (a stream) called once reaches a real resource too. Races are met by chance here (the tests
beside each fix meet them at a held lock); scripts/race_hunt.py --rounds N
hunts longer."""

from __future__ import annotations

import importlib.util
import json
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

    # The throwaway (an erasure's caller) is a member: the owner may not erase.
    return race_hunt.World(
        http,
        org.api_key,
        tenants(plan="enterprise", platform_admin=True).api_key,
        tenants(plan="team").api_key,
        events=events,
        throwaway=lambda: tenants.member().api_key,
    )


def test_the_table_is_every_write_that_reads_an_idempotency_key():
    """The protos' table (read from the descriptors) is the OpenAPI document's: the operations that declare
    `Idempotency-Key`, both generated from the same policies; but the streams, which declare it too and are
    called once each (`race_hunt.others`)."""
    doc = json.loads((ROOT / "gen" / "openapi.json").read_text())
    declared = {
        op["operationId"]
        for item in doc["paths"].values()
        for op in item.values()
        if isinstance(op, dict)
        and any("dempotency" in p.get("$ref", "") + p.get("name", "") for p in op.get("parameters", []))
    }
    streams = {rpc.name for rpc in race_hunt.contract_inputs.write_rpcs() if rpc.streaming and not rpc.anonymous}
    assert streams and streams <= declared
    assert {op.operation_id for op in race_hunt.operations()} == declared - streams


@pytest.mark.parametrize("op", race_hunt.operations(), ids=lambda op: op.operation_id)
def test_two_at_once_answer_as_one_after_the_other(world, op):
    findings = race_hunt.hunt_one(world, op)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize(
    "pair",
    race_hunt.against_delete(race_hunt.operations()),
    ids=lambda pair: f"{pair[0].operation_id}-{pair[1].operation_id}",
)
def test_an_update_at_once_with_its_delete_answers_as_one_after_the_other(world, pair):
    findings = race_hunt.hunt_against_delete(world, *pair)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("op", race_hunt.others(), ids=lambda op: op.operation_id)
def test_each_other_write_called_once_reaches_a_real_resource(world, op):
    findings = race_hunt.reach(world, op)
    assert not findings, "\n".join(map(str, findings))


def _op(name: str):
    return next(op for op in race_hunt.operations() if op.operation_id == name)


def test_an_input_that_misses_its_resource_is_a_finding(world, monkeypatch):
    """Planted: the endpoint's fixture hands out a made-up id (as the hand-written inputs did): the call alone
    answers 404, and the hunt says so instead of passing on two refusals."""
    monkeypatch.setattr(race_hunt.World, "_make_webhook_endpoint", lambda self: {"webhook_endpoint": "whe_madeup"})
    findings = race_hunt.hunt_one(world, _op("PingWebhookEndpoint"))
    assert any(f.scenario == "alone" and "reached no real resource" in f.what for f in findings), findings


def test_a_fixture_in_a_state_the_operation_does_not_act_on_is_a_finding(world, monkeypatch):
    """Planted: a restore's fixture left live (its STATES entry taken out): the call alone answers 409."""
    monkeypatch.delitem(race_hunt.STATES, "RestorePersona")
    findings = race_hunt.hunt_one(world, _op("RestorePersona"))
    assert any(f.scenario == "alone" and f.what.startswith("409: refused in its fixture's state") for f in findings)
