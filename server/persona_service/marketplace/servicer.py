from __future__ import annotations

from persona.v1 import marketplace_pb2

from persona_service.billing.api import BillingService, processor_for
from persona_service.files.api import storage_for
from persona_service.kernel.api import RequestContext, ServicerDeps, load, nullable_time, page_limit, timestamp
from persona_service.marketplace.records import ListingEdit, ListingRecord, PurchaseRecord
from persona_service.marketplace.service import MarketplaceService
from persona_service.marketplace.settings import MarketplaceSettings
from persona_service.personas.api import PersonaService


class MarketplaceServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.fee_bps = load(MarketplaceSettings).marketplace_fee_bps

    def _service(self, ctx: RequestContext) -> MarketplaceService:
        return MarketplaceService(ctx.work, cursors=self.deps.cursors)

    def _reviewed_soon(self, ctx: RequestContext) -> None:
        ctx.after_commit.append(self.deps.tasks.wake)

    def CreateListing(self, request: marketplace_pb2.CreateListingRequest,
                      ctx: RequestContext) -> marketplace_pb2.Listing:
        row = self._service(ctx).create(ctx.caller, request.persona_id, request.title, request.description,
                                        list(request.audience_tags), request.price_minor, request.currency)
        self._reviewed_soon(ctx)
        return listing(row, ctx.caller.org_id)

    def ListListings(self, request: marketplace_pb2.ListListingsRequest,
                     ctx: RequestContext) -> marketplace_pb2.ListListingsResponse:
        rows, token = self._service(ctx).search(ctx.caller, request.audience_tag, request.q, request.mine,
                                                request.cursor, page_limit(request))
        return marketplace_pb2.ListListingsResponse(items=[listing(r, ctx.caller.org_id) for r in rows],
                                                    next_cursor=token)

    def GetListing(self, request: marketplace_pb2.GetListingRequest,
                   ctx: RequestContext) -> marketplace_pb2.Listing:
        return listing(self._service(ctx).get(ctx.caller, request.id), ctx.caller.org_id)

    def UpdateListing(self, request: marketplace_pb2.UpdateListingRequest,
                      ctx: RequestContext) -> marketplace_pb2.Listing:
        edit = ListingEdit(
            title=request.title if request.HasField("title") else None,
            description=request.description if request.HasField("description") else None,
            audience_tags=list(request.audience_tags) if request.audience_tags else None,
            price_minor=request.price_minor if request.HasField("price_minor") else None)
        row = self._service(ctx).update(ctx.caller, request.id, edit)
        self._reviewed_soon(ctx)
        return listing(row, ctx.caller.org_id)

    def UnpublishListing(self, request: marketplace_pb2.UnpublishListingRequest,
                         ctx: RequestContext) -> marketplace_pb2.Listing:
        return listing(self._service(ctx).unpublish(ctx.caller, request.id), ctx.caller.org_id)

    def PurchaseListing(self, request: marketplace_pb2.PurchaseListingRequest,
                        ctx: RequestContext) -> marketplace_pb2.Purchase:
        billing = BillingService(ctx.work, processor_for(self.deps, ctx.work), storage_for(self.deps))
        personas = PersonaService(ctx.work, self.deps.provider_for(ctx), cursors=self.deps.cursors)
        return purchase(self._service(ctx).purchase(ctx.caller, request.id, billing, personas, self.fee_bps))


def listing(row: ListingRecord, caller_org_id: str) -> marketplace_pb2.Listing:
    return marketplace_pb2.Listing(
        id=row.id, persona_id=row.persona_id, title=row.title, description=row.description,
        audience_tags=row.audience_tags, price_minor=row.price_minor, currency=row.currency, status=row.status,
        rejection_reason=row.rejection_reason, mine=row.org_id == caller_org_id,
        created_at=timestamp(row.created_at), updated_at=timestamp(row.updated_at),
        published_at=nullable_time(row.published_at),
    )


def purchase(row: PurchaseRecord) -> marketplace_pb2.Purchase:
    return marketplace_pb2.Purchase(
        id=row.id, listing_id=row.listing_id, persona_id=row.persona_id, invoice_id=row.invoice_id,
        amount_minor=row.amount_minor, currency=row.currency, created_at=timestamp(row.created_at),
    )
