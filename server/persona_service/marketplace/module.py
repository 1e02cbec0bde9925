"""The marketplace: listings reviewed by moderation, search across
organizations, purchases charged through billing."""

import pathlib

from persona.v1 import marketplace_pb2_grpc

from persona_service.kernel.api import NO_CALL, Module, Runtime, ServiceBinding, TaskKind, TaskRecord
from persona_service.marketplace.service import REVIEW_TASK, MarketplaceService
from persona_service.marketplace.servicer import MarketplaceServicer
from persona_service.marketplace.settings import MarketplaceSettings
from persona_service.providers.factory import backoff_delays
from persona_service.providers.retrying import Retrying


def _review(runtime: Runtime, task: TaskRecord) -> None:
    provider = Retrying(runtime.provider, NO_CALL, delays=backoff_delays())  # a task: nobody's request
    with runtime.work() as work:
        MarketplaceService(work, moderate=provider.moderate).review(task.subject_id)


def _give_up(runtime: Runtime, task: TaskRecord, error: str) -> None:
    """A review that never finished leaves the listing unpublished, never published unchecked."""
    with runtime.work() as work:
        MarketplaceService(work).reject_unreviewed(task.subject_id)


MODULE = Module(
    name="marketplace",
    services=(ServiceBinding("persona.v1.MarketplaceService", MarketplaceServicer,
                             marketplace_pb2_grpc.add_MarketplaceServiceServicer_to_server),),
    id_prefixes={"listing": "lst", "purchase": "pur"},
    event_types=frozenset({"marketplace.persona.published", "marketplace.persona.purchased"}),
    review_resolvers={"marketplace_listing": lambda work, listing_id, decision:
                      MarketplaceService(work).resolve_review(listing_id, decision)},
    tasks=(TaskKind(REVIEW_TASK, _review, _give_up, max_attempts=5, lease_seconds=300),),
    settings=MarketplaceSettings,
    migrations=pathlib.Path(__file__).with_name("migrations"),
)
