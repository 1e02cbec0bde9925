"""Billing: each organization's subscription (its plan, hence its limits) and invoices."""

import pathlib
from datetime import datetime

from persona.v1 import billing_pb2_grpc

from persona_service.billing.processor import DECLINE_KEY, PROCESSOR, processor_for
from persona_service.billing.repository import BillingRepository
from persona_service.billing.service import BillingService, add_month, billing_period
from persona_service.billing.servicer import BillingServicer
from persona_service.billing.settings import BillingSettings
from persona_service.files.api import storage_for
from persona_service.kernel.api import ConfigKey, Job, Module, Runtime, ServiceBinding, Work


def renew_subscriptions(runtime: Runtime) -> int:
    """Periods that ended renew (row locks: several processes never renew one
    twice); an organization whose plan changed is read again everywhere.
    Then overdue open invoices get one more charge or go `uncollectible`."""
    storage = storage_for(runtime)
    with runtime.work() as work:
        renewed = BillingService(work, processor_for(runtime, work), storage, clock=runtime.clock).renew_due()
    with runtime.work() as work:
        BillingService(work, processor_for(runtime, work), storage, clock=runtime.clock).collect_overdue()
    for before in renewed:
        if before.cancel_at_period_end:
            runtime.invalidate(f"org:{before.org_id}")
    return len(renewed)


def open_subscription(work: Work, org_id: str, plan: str, now: datetime) -> None:
    """The organization-opener port (the onboarding of another module calls it: a port module.py declares is this
    module's door, as its api.py is): a new organization's subscription, on its plan, its first period starting
    now, not invoiced (the first invoice is a plan change's proration or the first renewal's)."""
    work.of(BillingRepository).add_subscription(org_id, plan, now, add_month(now))


MODULE = Module(
    name="billing",
    migrations=pathlib.Path(__file__).with_name("migrations"),
    services=(ServiceBinding("persona.v1.BillingService", BillingServicer,
                             billing_pb2_grpc.add_BillingServiceServicer_to_server),),
    id_prefixes={"invoice": "inv"},
    event_types=frozenset({"subscription.upgraded", "subscription.downgraded", "subscription.cancelled"}),
    settings=BillingSettings,
    resources=(PROCESSOR,),
    config_keys=(ConfigKey(DECLINE_KEY, "boolean", False, levels=("org",), owner_only=True),),
    usage_period=billing_period,
    open_organization=open_subscription,
    jobs=(Job("billing.renew", 60, renew_subscriptions),),
)
