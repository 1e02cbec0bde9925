from __future__ import annotations

from google.api import httpbody_pb2
from persona.v1 import dashboard_pb2

from persona_service.dashboard.assets import Asset, bundle
from persona_service.kernel.api import NotFound, RequestContext, ServicerDeps

# The page runs only this origin's scripts and styles and calls only this
# origin's API; images may also come from an object store's presigned URLs.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       "img-src 'self' data: blob: https:; object-src 'none'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def _answer(ctx: RequestContext, asset: Asset, cache_control: str, **headers: str) -> httpbody_pb2.HttpBody:
    """The asset, or 304 with no body when the client holds this version."""
    ctx.respond(None, etag=asset.etag, cache_control=cache_control, x_content_type_options="nosniff", **headers)
    sent = ctx.metadata.get("if-none-match", "")
    if asset.etag in (tag.strip() for tag in sent.split(",")) or sent.strip() == "*":
        ctx.respond(304)
        return httpbody_pb2.HttpBody(content_type=asset.content_type)
    return httpbody_pb2.HttpBody(content_type=asset.content_type, data=asset.data)


class DashboardServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetDashboardPage(self, request: dashboard_pb2.GetDashboardPageRequest,
                         ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return _answer(ctx, bundle().page, REVALIDATE, content_security_policy=CSP,
                       referrer_policy="no-referrer", x_frame_options="DENY")

    def GetDashboardAsset(self, request: dashboard_pb2.GetDashboardAssetRequest,
                          ctx: RequestContext) -> httpbody_pb2.HttpBody:
        asset = bundle().find(request.name)
        if asset is None:
            raise NotFound("dashboard asset")
        return _answer(ctx, asset, IMMUTABLE if request.name == asset.hashed else REVALIDATE)
