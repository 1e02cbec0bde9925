from __future__ import annotations

from persona.v1 import moderation_pb2

from persona_service.kernel.api import RequestContext, ServicerDeps, nullable_time, page_limit, struct, timestamp
from persona_service.moderation.queue import ModerationQueue
from persona_service.moderation.records import ReviewFilters, ReviewRecord


class ModerationServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.resolvers = deps.modules.review_resolvers  # (taken when built: an undeclared need fails the start)

    def _queue(self, ctx: RequestContext) -> ModerationQueue:
        return ModerationQueue(ctx.work, cursors=self.deps.cursors, resolvers=self.resolvers)

    def ListModerationQueue(self, request: moderation_pb2.ListModerationQueueRequest,
                            ctx: RequestContext) -> moderation_pb2.ListModerationQueueResponse:
        filters = ReviewFilters(stage=request.stage, category=request.category, org_id=request.org_id)
        rows, token = self._queue(ctx).list(filters, request.cursor, page_limit(request))
        return moderation_pb2.ListModerationQueueResponse(items=[review(r) for r in rows], next_cursor=token)

    def ClaimModerationReview(self, request: moderation_pb2.ClaimModerationReviewRequest,
                              ctx: RequestContext) -> moderation_pb2.ModerationReview:
        return review(self._queue(ctx).claim(ctx.caller, request.id))

    def ResolveModerationReview(self, request: moderation_pb2.ResolveModerationReviewRequest,
                                ctx: RequestContext) -> moderation_pb2.ModerationReview:
        return review(self._queue(ctx).resolve(ctx.caller, request.id, request.decision, request.note))


def review(row: ReviewRecord) -> moderation_pb2.ModerationReview:
    return moderation_pb2.ModerationReview(
        id=row.id, org_id=row.org_id, workspace_id=row.workspace_id, stage=row.stage, subject_type=row.subject_type,
        subject_id=row.subject_id, categories=row.categories, scores=struct(row.scores or {}), excerpt=row.excerpt,
        status=row.status, claimed_by=row.claimed_by, claim_expires_at=nullable_time(row.claim_expires_at),
        decision=row.decision, note=row.note, resolved_by=row.resolved_by, resolved_at=nullable_time(row.resolved_at),
        created_at=timestamp(row.created_at),
    )
