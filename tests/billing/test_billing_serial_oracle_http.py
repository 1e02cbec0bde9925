"""An organization's billing writes at once answer as one serial order would (tests/oracle.py), through
Envoy: plan changes up and down, cancel and resume of a Pro subscription, each pair fired together behind a
barrier and compared with both serial orders (plan, status, cancel flag, whether a credit is held, and the
kinds of invoices issued)."""

from __future__ import annotations

from dataclasses import dataclass

from oracle import Op, body, new_org, org_pair_test, org_table, uncovered


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]


def _fixture(http, tenants) -> Fixture:
    return Fixture(new_org(http, tenants, "pro", "GET", "/v1/billing/subscription")[0])  # opened on Pro


def _ops(http) -> list[Op]:
    def post(path: str, rpc: str, distinguishing: dict | None = None):
        return lambda f: http.post(f"/v1/billing/subscription/{path}", json=body(rpc, distinguishing=distinguishing),
                                   headers=f.auth)

    # Distinguishing: the plan (the state reads it; the generator's own, Enterprise, is no change the two differ by).
    return [Op("upgrade", post("change", "ChangeSubscription", {"plan": "team"}), "ChangeSubscription"),
            Op("downgrade", post("change", "ChangeSubscription", {"plan": "free"}), "ChangeSubscription"),
            Op("cancel", post("cancel", "CancelSubscription"), "CancelSubscription"),
            Op("resume", post("resume", "ResumeSubscription"), "ResumeSubscription")]


def _state(http, f: Fixture):
    sub = http.get("/v1/billing/subscription", headers=f.auth).json()
    invoices = http.get("/v1/billing/invoices", headers=f.auth).json()["items"]
    kinds = sorted(line["description"].split(":")[0] for i in invoices for line in i["lineItems"])
    # The credit's amount depends on the second the change ran (a proration); that one is held is the state.
    return sub["plan"], sub["status"], sub["cancelAtPeriodEnd"], sub["creditMinor"] > 0, kinds


_table = org_table("a Pro subscription", _fixture, _state, _ops)
test_two_writes_at_once_answer_as_one_serial_order = org_pair_test(_table)


def test_the_oracle_tries_every_write_of_a_subscription():
    """All but the processor's event (`ReceiveStripeEvent`: tests/billing/test_stripe.py holds a redelivery
    and an older event racing a newer one)."""
    assert uncovered("BillingService", [_table(None, None)]) == {"ReceiveStripeEvent"}
