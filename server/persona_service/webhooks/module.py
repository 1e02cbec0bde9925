"""Webhook endpoints, deliveries and the delivery worker process."""

import argparse
import pathlib

from persona.v1 import webhooks_pb2_grpc

from persona_service.kernel.api import AGE_OUT_EVERY, Command, Job, Module, Process, Runtime, ServiceBinding
from persona_service.webhooks.servicer import WebhookServicer
from persona_service.webhooks.settings import WebhookSettings


def _worker(args: argparse.Namespace) -> int:
    from persona_service.webhooks.worker import main

    main()
    return 0


def _sample_queue(runtime: Runtime) -> int:
    """The pending deliveries, for persona_webhook_queue_depth."""
    from persona_service.webhooks.metrics import QUEUE_DEPTH
    from persona_service.webhooks.repository import DeliveryQueue

    with runtime.connect() as conn:
        QUEUE_DEPTH.set(DeliveryQueue(conn).pending_count())
    return 0


def _age_out(runtime: Runtime) -> int:
    """`webhooks.partitions`: the deliveries' and attempts' months made ahead, those past the retention dropped
    (migration 0034: no key joins the two, so each table ages out on its own, by the same rule)."""
    from persona_service.kernel.api import age_out, load

    days = load(WebhookSettings).delivery_retention_days
    return sum(age_out(runtime.engine, table, days, runtime.clock()) for table in ("webhook_deliveries", "webhook_attempts"))


def _lanes() -> int:
    from persona_service.kernel.api import load

    return load(WebhookSettings).lanes


MODULE = Module(
    name="webhooks",
    migrations=pathlib.Path(__file__).with_name("migrations"),
    services=(
        ServiceBinding("persona.v1.WebhookService", WebhookServicer, webhooks_pb2_grpc.add_WebhookServiceServicer_to_server),
    ),
    id_prefixes={"webhook_endpoint": "whe", "webhook_delivery": "whd"},
    event_types=frozenset({"webhook.endpoint.test_ping"}),
    commands=(Command("worker", "run the webhook delivery worker (DATABASE_URL, or the embedded PostgreSQL)", _worker),),
    processes=(Process("webhook-worker", "worker", db_connections=lambda: _lanes() + 2),),
    settings=WebhookSettings,
    jobs=(Job("webhooks.sample_queue", 15, _sample_queue), Job("webhooks.partitions", AGE_OUT_EVERY, _age_out)),
)
