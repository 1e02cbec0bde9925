"""An organization's billing writes at once answer as one serial order would (tests/oracle.py), through
Envoy: plan changes up and down, cancel and resume of a Pro subscription, each pair fired together behind a
barrier and compared with both serial orders (plan, status, cancel flag, whether a credit is held, and the
kinds of invoices issued)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, check_pair, writes_covered
from persona.v1 import billing_pb2


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]


def _fixture(http, tenants) -> Fixture:
    org = tenants(plan="pro")
    assert http.get("/v1/billing/subscription", headers=org.auth).status_code == 200  # opened on Pro
    return Fixture(org.auth)


def _ops(http) -> list[Op]:
    def post(path: str, body: dict | None = None):
        return lambda f: http.post(f"/v1/billing/subscription/{path}", json=body or {}, headers=f.auth)

    return [Op("upgrade", post("change", {"plan": "team"}), "ChangeSubscription"),
            Op("downgrade", post("change", {"plan": "free"}), "ChangeSubscription"),
            Op("cancel", post("cancel"), "CancelSubscription"),
            Op("resume", post("resume"), "ResumeSubscription")]


def _state(http, f: Fixture):
    sub = http.get("/v1/billing/subscription", headers=f.auth).json()
    invoices = http.get("/v1/billing/invoices", headers=f.auth).json()["items"]
    kinds = sorted(line["description"].split(":")[0] for i in invoices for line in i["lineItems"])
    # The credit's amount depends on the second the change ran (a proration); that one is held is the state.
    return sub["plan"], sub["status"], sub["cancelAtPeriodEnd"], sub["creditMinor"] > 0, kinds


def _table(http, tenants) -> Table:
    return Table("a Pro subscription", make=lambda: _fixture(http, tenants), read=lambda f: _state(http, f),
                 ops=_ops(http))


PAIRS = [(a.name, b.name) for a, b in _table(None, None).pairs]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_writes_at_once_answer_as_one_serial_order(http, tenants, a, b):
    table = _table(http, tenants)
    ops = {op.name: op for op in table.ops}
    assert check_pair(table, ops[a], ops[b]) == []


def test_the_oracle_tries_every_write_of_a_subscription():
    """All but the processor's event (`ReceiveStripeEvent`: tests/billing/test_stripe.py holds a redelivery
    and an older event racing a newer one)."""
    service = billing_pb2.DESCRIPTOR.services_by_name["BillingService"]
    assert writes_covered(service, [_table(None, None)], set()) == {"ReceiveStripeEvent"}
