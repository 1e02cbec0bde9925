from persona.v1 import admin_pb2

from persona_service.admin.service import build_one_export
from persona_service.files.api import storage_for
from persona_service.kernel.api import RequestContext, ServicerDeps, load, nullable_time, timestamp
from persona_service.privacy.api import PrivacySettings
from persona_service.webhooks.api import WebhookService, WebhookSettings


class AdminServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.exporters = deps.modules.personal_data  # (taken when built: an undeclared need fails the start)
        self.privacy = load(PrivacySettings)
        self.webhooks = load(WebhookSettings)

    def BuildOneDsarExport(self, request: admin_pb2.BuildOneDsarExportRequest,
                           ctx: RequestContext) -> admin_pb2.BuildOneDsarExportResponse:
        export_id = build_one_export(ctx.work, storage_for(self.deps), self.exporters, self.privacy) or ""
        return admin_pb2.BuildOneDsarExportResponse(handled=bool(export_id), job_id=export_id, export_id=export_id)

    def RotateWebhookSecrets(self, request: admin_pb2.RotateWebhookSecretsRequest,
                             ctx: RequestContext) -> admin_pb2.RotateWebhookSecretsResponse:
        max_age, grace = self.webhooks.secret_max_age_seconds, self.webhooks.secret_rotation_grace_seconds
        results = WebhookService(ctx.work, box=self.deps.secret_box).rotate_secrets(max_age_seconds=max_age, grace_seconds=grace)
        return admin_pb2.RotateWebhookSecretsResponse(
            results=[
                admin_pb2.WebhookSecretRotationResult(
                    endpoint_id=r.endpoint_id, org_id=r.org_id, outcome=r.outcome,
                    secret_created_at=timestamp(r.secret_created_at),
                    previous_secret_expires_at=nullable_time(r.previous_secret_expires_at),
                )
                for r in results
            ],
            rotated_count=sum(r.outcome == "rotated" for r in results),
            max_age_seconds=max_age, secret_rotation_grace_seconds=grace,
        )
