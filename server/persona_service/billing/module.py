"""Billing: each organization's subscription (its plan, hence its limits) and invoices."""

import pathlib

from persona.v1 import billing_pb2_grpc

from persona_service.billing.processor import DECLINE_KEY, PROCESSOR, processor_for
from persona_service.billing.service import BillingService, billing_period
from persona_service.billing.servicer import BillingServicer
from persona_service.billing.settings import BillingSettings
from persona_service.files.api import storage_for
from persona_service.kernel.api import ConfigKey, Job, Module, Runtime, ServiceBinding


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
    jobs=(Job("billing.renew", 60, renew_subscriptions),),
)
