"""Moderation: a non-pass verdict at any stage records a review item (for
the admin queue) and emits `moderation.flagged`."""

from __future__ import annotations

from persona_service.kernel.api import ApiError, ModerationResult, Outbox, Work, new_id
from persona_service.moderation.records import NewReview
from persona_service.moderation.repository import ModerationRepository


class ModerationBlocked(ApiError):
    code = "moderation_blocked"


STAGES = ("input_intent", "output_content", "impersonation", "pii")


def record_flag(work: Work, *, org_id: str, workspace_id: str, stage: str, subject_type: str, subject_id: str,
                text: str, result: ModerationResult) -> str:
    review_id = new_id("moderation_review")
    work.of(ModerationRepository).add(NewReview(
        id=review_id, org_id=org_id, workspace_id=workspace_id, stage=stage, subject_type=subject_type,
        subject_id=subject_id, categories=list(result.categories), scores=dict(result.scores), excerpt=text[:500],
    ))
    Outbox(work).emit(
        "moderation.flagged", org_id, workspace_id,
        {"reviewId": review_id, "stage": stage, "categories": list(result.categories), "subjectType": subject_type,
         "subjectId": subject_id},
    )
    return review_id
