from __future__ import annotations

from persona.v1 import privacy_pb2

from persona_service.files.api import storage_for
from persona_service.kernel.api import (
    RequestContext,
    ServicerDeps,
    nullable_time,
    page_limit,
    struct,
    timestamp,
    utcnow,
)
from persona_service.privacy.records import ExportRecord
from persona_service.privacy.service import PrivacyService, download_of, status_of


class PrivacyServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        # (Taken when built: a need its module did not declare fails the process's start.)
        self.erasers, self.erasure_locks = deps.modules.erasers, deps.modules.erasure_locks

    def _export(self, row: ExportRecord) -> privacy_pb2.PrivacyExport:
        now = utcnow()
        link = download_of(row, storage_for(self.deps), now)
        return privacy_pb2.PrivacyExport(
            id=row.id, status=status_of(row, now), download_url=link.url if link else "",
            expires_at=nullable_time(row.expires_at if link else None), sha256=row.sha256 if link else "",
            created_at=timestamp(row.created_at), completed_at=nullable_time(row.completed_at),
        )

    def CreatePrivacyExport(self, request: privacy_pb2.CreatePrivacyExportRequest,
                            ctx: RequestContext) -> privacy_pb2.PrivacyExport:
        row = PrivacyService(ctx.work).request(ctx.caller)
        return self._export(row)

    def EraseMyData(self, request: privacy_pb2.EraseMyDataRequest,
                    ctx: RequestContext) -> privacy_pb2.PrivacyErasure:
        erasure = PrivacyService(ctx.work).erase(ctx.caller, self.erasers, self.erasure_locks,
                                                 storage_for(self.deps))
        # Every process drops the organizations' cached credentials: the user's stop working at once.
        def drop_cached() -> None:
            for org_id in erasure.org_ids:
                self.deps.invalidate(f"org:{org_id}")

        ctx.after_commit.append(drop_cached)
        return privacy_pb2.PrivacyErasure(erased_at=timestamp(utcnow()), counts=struct(erasure.counts))

    def ListPrivacyExports(self, request: privacy_pb2.ListPrivacyExportsRequest,
                           ctx: RequestContext) -> privacy_pb2.ListPrivacyExportsResponse:
        rows, token = PrivacyService(ctx.work, cursors=self.deps.cursors).list(
            ctx.caller, request.cursor, page_limit(request))
        return privacy_pb2.ListPrivacyExportsResponse(items=[self._export(r) for r in rows], next_cursor=token)
