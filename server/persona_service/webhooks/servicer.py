from persona.v1 import webhooks_pb2

from persona_service.kernel.api import RequestContext, ServicerDeps, load, nullable_time, page_limit, timestamp
from persona_service.webhooks.records import AttemptRecord, DeliveryRecord, EndpointRecord
from persona_service.webhooks.service import WebhookService
from persona_service.webhooks.settings import WebhookSettings


def endpoint(row: EndpointRecord) -> webhooks_pb2.WebhookEndpoint:
    return webhooks_pb2.WebhookEndpoint(
        id=row.id, url=row.url, events=row.events, description=row.description, enabled=row.enabled,
        standard_webhooks=row.standard_webhooks, workspace_id=row.workspace_id, created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at), secret_created_at=timestamp(row.secret_created_at),
        previous_secret_expires_at=nullable_time(row.previous_secret_expires_at if row.previous_secret_enc else None),
    )


def delivery(row: DeliveryRecord, attempts: list[AttemptRecord]) -> webhooks_pb2.WebhookDelivery:
    return webhooks_pb2.WebhookDelivery(
        id=row.id, endpoint_id=row.endpoint_id, event_id=row.event_id, event_type=row.event_type,
        status=row.status, attempt_count=row.attempt_count,
        next_attempt_at=nullable_time(row.next_attempt_at if row.status == "pending" else None),
        created_at=timestamp(row.created_at), completed_at=nullable_time(row.completed_at),
        replay_of=row.replay_of or "",
        attempts=[
            webhooks_pb2.WebhookDeliveryAttempt(
                attempt=a.attempt, attempted_at=timestamp(a.attempted_at), status_code=a.status_code,
                latency_ms=a.latency_ms, response_body=a.response_body, error=a.error, success=a.success,
            )
            for a in attempts
        ],
    )


class WebhookServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.allow_private = load(WebhookSettings).private_allowed

    def _service(self, ctx: RequestContext) -> WebhookService:
        return WebhookService(
            ctx.work, self.deps.cursors, self.deps.secret_box, allow_private=self.allow_private
        )

    def CreateWebhookEndpoint(self, request: webhooks_pb2.CreateWebhookEndpointRequest,
                              ctx: RequestContext) -> webhooks_pb2.CreateWebhookEndpointResponse:
        row, secret = self._service(ctx).create(
            ctx.caller, url=request.url, events=list(request.events), description=request.description,
            enabled=request.enabled if request.HasField("enabled") else True,
            standard_webhooks=request.standard_webhooks,
        )
        return webhooks_pb2.CreateWebhookEndpointResponse(endpoint=endpoint(row), secret=secret)

    def ListWebhookEndpoints(self, request: webhooks_pb2.ListWebhookEndpointsRequest,
                             ctx: RequestContext) -> webhooks_pb2.ListWebhookEndpointsResponse:
        rows, cursor = self._service(ctx).list(ctx.caller, request.cursor, page_limit(request))
        return webhooks_pb2.ListWebhookEndpointsResponse(items=[endpoint(r) for r in rows], next_cursor=cursor)

    def GetWebhookEndpoint(self, request: webhooks_pb2.GetWebhookEndpointRequest,
                           ctx: RequestContext) -> webhooks_pb2.WebhookEndpoint:
        return endpoint(self._service(ctx).get(ctx.caller, request.id))

    def GetWebhookEndpointSecret(self, request: webhooks_pb2.GetWebhookEndpointSecretRequest,
                                 ctx: RequestContext) -> webhooks_pb2.WebhookEndpointSecret:
        secrets = self._service(ctx).secrets(ctx.caller, request.id)
        return webhooks_pb2.WebhookEndpointSecret(
            secret=secrets.secret, secret_created_at=timestamp(secrets.secret_created_at),
            previous_secret=secrets.previous_secret,
            previous_secret_expires_at=nullable_time(secrets.previous_secret_expires_at),
        )

    def UpdateWebhookEndpoint(self, request: webhooks_pb2.UpdateWebhookEndpointRequest,
                              ctx: RequestContext) -> webhooks_pb2.WebhookEndpoint:
        row = self._service(ctx).update(
            ctx.caller, request.id,
            url=request.url if request.HasField("url") else None,
            events=list(request.events) or None,
            description=request.description if request.HasField("description") else None,
            enabled=request.enabled if request.HasField("enabled") else None,
            standard_webhooks=request.standard_webhooks if request.HasField("standard_webhooks") else None,
        )
        return endpoint(row)

    def DeleteWebhookEndpoint(self, request: webhooks_pb2.DeleteWebhookEndpointRequest,
                              ctx: RequestContext) -> webhooks_pb2.DeleteWebhookEndpointResponse:
        return webhooks_pb2.DeleteWebhookEndpointResponse(id=self._service(ctx).delete(ctx.caller, request.id), deleted=True)

    def PingWebhookEndpoint(self, request: webhooks_pb2.PingWebhookEndpointRequest,
                            ctx: RequestContext) -> webhooks_pb2.PingWebhookEndpointResponse:
        return webhooks_pb2.PingWebhookEndpointResponse(event_id=self._service(ctx).ping(ctx.caller, request.id))

    def ListWebhookDeliveries(self, request: webhooks_pb2.ListWebhookDeliveriesRequest,
                              ctx: RequestContext) -> webhooks_pb2.ListWebhookDeliveriesResponse:
        items, cursor = self._service(ctx).deliveries(ctx.caller, request.webhook_id, request.status, request.cursor, page_limit(request))
        return webhooks_pb2.ListWebhookDeliveriesResponse(items=[delivery(r, a) for r, a in items], next_cursor=cursor)

    def ReplayWebhookDelivery(self, request: webhooks_pb2.ReplayWebhookDeliveryRequest,
                              ctx: RequestContext) -> webhooks_pb2.WebhookDelivery:
        return delivery(*self._service(ctx).replay(ctx.caller, request.webhook_id, request.id))
