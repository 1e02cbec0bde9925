from __future__ import annotations

import re
import threading
from collections.abc import Callable

from google.protobuf.message import Message
from persona.v1 import portraits_pb2

from persona_service.files.api import FileSettings, Storage, storage_for
from persona_service.kernel.api import (
    ProviderError,
    ProviderTimeout,
    Quota,
    RequestContext,
    ServicerDeps,
    int32,
    load,
    page_limit,
    timestamp,
)
from persona_service.portraits.records import SETTLED, PortraitRecord
from persona_service.portraits.render import provider_name
from persona_service.portraits.service import PortraitService
from persona_service.portraits.settings import PortraitSettings


class PortraitServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.ttl = load(FileSettings).signed_url_ttl_seconds
        self.wait_seconds = load(PortraitSettings).portrait_wait_seconds
        # At most half the unary threads wait for images at once; beyond them a
        # call answers its row at once, so slow images never starve other calls.
        self._waiting = threading.BoundedSemaphore(max(1, deps.unary_workers // 2))

    def _service(self, ctx: RequestContext) -> PortraitService:
        return PortraitService(ctx.work, moderate=self.deps.provider_for(ctx).moderate, cursors=self.deps.cursors)

    def _quota(self, ctx: RequestContext) -> Quota:
        return self.deps.quota(ctx.caller, "images_per_month", ctx.work)

    def _portrait(self, row: PortraitRecord) -> portraits_pb2.Portrait:
        return portrait(row, storage_for(self.deps), self.ttl)

    def CreatePortrait(self, request: portraits_pb2.CreatePortraitRequest,
                       ctx: RequestContext) -> portraits_pb2.Portrait:
        row = self._service(ctx).create(ctx.caller, request.persona_id, request.prompt, request.style, self._quota(ctx))
        self._settle_after_commit(ctx, row.id, self._portrait)
        return self._portrait(row)

    def EditPortrait(self, request: portraits_pb2.EditPortraitRequest,
                     ctx: RequestContext) -> portraits_pb2.PortraitEditResult:
        row = self._service(ctx).edit(
            ctx.caller, request.persona_id, request.id, request.instruction, self._quota(ctx))
        self._settle_after_commit(ctx, row.id, self._edit_result)
        return self._edit_result(row)

    def GetPortrait(self, request: portraits_pb2.GetPortraitRequest,
                    ctx: RequestContext) -> portraits_pb2.Portrait:
        return self._portrait(self._service(ctx).get(ctx.caller, request.persona_id, request.id))

    def ListPortraits(self, request: portraits_pb2.ListPortraitsRequest,
                      ctx: RequestContext) -> portraits_pb2.ListPortraitsResponse:
        rows, token = self._service(ctx).list(
            ctx.caller, request.persona_id, request.conversation_id, request.cursor,
            page_limit(request))
        return portraits_pb2.ListPortraitsResponse(items=[self._portrait(r) for r in rows], next_cursor=token)

    def ApprovePortrait(self, request: portraits_pb2.ApprovePortraitRequest,
                        ctx: RequestContext) -> portraits_pb2.Portrait:
        return self._portrait(self._service(ctx).approve(ctx.caller, request.persona_id, request.id))

    def RejectPortrait(self, request: portraits_pb2.RejectPortraitRequest,
                       ctx: RequestContext) -> portraits_pb2.Portrait:
        return self._portrait(self._service(ctx).reject(ctx.caller, request.persona_id, request.id))

    def _edit_result(self, row: PortraitRecord) -> portraits_pb2.PortraitEditResult:
        url = storage_for(self.deps).signed_url(row.storage_key, self.ttl)
        return portraits_pb2.PortraitEditResult(
            portrait_id=row.id, conversation_id=row.conversation_id, status=row.status,
            storage_key=row.storage_key, signed_url=url.url,
        )

    def _settle_after_commit(self, ctx: RequestContext, portrait_id: str,
                             answer: Callable[[PortraitRecord], Message]) -> None:
        """Once the row and its task are committed: wake this process's task
        threads, then wait a little for the image (PERSONA_PORTRAIT_WAIT_SECONDS,
        or the client's `Prefer: wait=N`, RFC 7240) and answer the row as it
        is then (a provider failure within the wait answers 502/504)."""
        wait = _preferred_wait(ctx, self.wait_seconds)

        def settled() -> PortraitRecord | None:
            row = self.deps.read_apart(lambda work: PortraitService(work).reread(portrait_id))
            return row if row is None or row.status in SETTLED else None

        def finish(response: Message) -> Message:
            self.deps.tasks.wake()
            if not wait or not self._waiting.acquire(blocking=False):
                return response
            try:
                row = self.deps.tasks.wait_until(settled, wait)
            finally:
                self._waiting.release()
            if row is None:
                return response
            if row.status == "failed" and row.failure_code in ("provider_error", "provider_timeout"):
                error = ProviderTimeout if row.failure_code == "provider_timeout" else ProviderError
                raise error(provider_name(self.deps), "the image provider failed")
            return answer(row)

        ctx.finish = finish


_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait=(\d{1,3})(?:$|[,;\s])")
MAX_WAIT = 30


def _preferred_wait(ctx: RequestContext, default: float) -> float:
    prefer = ctx.metadata.get("prefer", "")
    found = _PREFER_WAIT.search(prefer)
    return min(float(found.group(1)), MAX_WAIT) if found else default


def portrait(row: PortraitRecord, storage: Storage, ttl: int) -> portraits_pb2.Portrait:
    url = storage.signed_url(row.storage_key, ttl)
    return portraits_pb2.Portrait(
        id=row.id, persona_id=row.persona_id, conversation_id=row.conversation_id,
        parent_portrait_id=row.parent_portrait_id or "", instruction=row.instruction, prompt=row.prompt,
        style=row.style, status=row.status, canonical=row.canonical, storage_key=row.storage_key,
        signed_url=url.url, signed_url_expires_at=timestamp(url.expires_at), size=int32(row.size), width=row.width,
        height=row.height, failure_code=row.failure_code, created_at=timestamp(row.created_at),
        updated_at=timestamp(row.updated_at),
    )
