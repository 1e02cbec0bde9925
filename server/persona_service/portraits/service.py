"""Portraits: generations and natural-language edits along conversation chains.

The service writes rows and enqueues their render (kernel.transport.tasks); the render
itself (`render.py`) runs outside any request. Services never commit.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import formatdate

from persona_service.files.api import object_key
from persona_service.kernel.api import (
    ApiError,
    CursorCodec,
    ImagePrompt,
    ModerationResult,
    NotFound,
    Outbox,
    Principal,
    Quota,
    StateConflict,
    Work,
    enqueue,
    is_uuid,
    iso,
    keyset_page,
    utcnow,
)
from persona_service.moderation.api import ModerationBlocked, record_flag
from persona_service.personas.api import PersonaDirectory, PersonaRecord
from persona_service.portraits.records import EDITABLE, NewPortrait, PortraitChanges, PortraitRecord
from persona_service.portraits.repository import PortraitRepository

RENDER_TASK = "portraits.render"
DEFAULT_STYLE = "flat"


class PortraitQuotaExceeded(ApiError):
    code = "quota_exceeded"


@dataclass(frozen=True)
class RenderJob:
    """What the render task needs, read in one short transaction."""

    portrait: PortraitRecord
    prompt: ImagePrompt | None  # a generation's
    source_key: str | None  # an edit's source image


class PortraitService:
    def __init__(self, work: Work, *, moderate: Callable[[str], ModerationResult] | None = None,
                 cursors: CursorCodec | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.work = work
        self._repo = work.of(PortraitRepository)
        self.personas = PersonaDirectory(work)
        self.moderate = moderate
        self.cursors = cursors
        self.clock = clock

    # --- requests ---------------------------------------------------------------------

    def create(self, principal: Principal, persona_id: str, prompt: str, style: str, images_per_month: Quota
               ) -> PortraitRecord:
        persona = self._persona(principal, persona_id, hold=True)
        if persona.state == "archived":
            raise StateConflict("The persona is archived and read-only.", "state", {"state": "archived"})
        if prompt.strip():
            self._moderate(principal, prompt, "portrait_prompt", persona_id)
        portrait_id = str(uuid.uuid4())
        return self._add(principal, images_per_month, portrait_id, persona_id, conversation_id=portrait_id,
                         prompt=prompt, style=style or DEFAULT_STYLE)

    def edit(self, principal: Principal, persona_id: str, portrait_id: str, instruction: str,
             images_per_month: Quota) -> PortraitRecord:
        source = self._editable(principal, persona_id, portrait_id)
        self._moderate(principal, instruction, "portrait_instruction", portrait_id)
        return self._add(principal, images_per_month, str(uuid.uuid4()), persona_id,
                         conversation_id=source.conversation_id, parent_portrait_id=source.id,
                         instruction=instruction, style=source.style)

    def get(self, principal: Principal, persona_id: str, portrait_id: str) -> PortraitRecord:
        row = self._repo.get(principal.workspace_id, persona_id, portrait_id) if is_uuid(portrait_id) else None
        if row is None:
            raise NotFound("portrait")
        return row

    def list(self, principal: Principal, persona_id: str, conversation_id: str, cursor: str,
             limit: int) -> tuple[builtins.list[PortraitRecord], str]:
        self._persona(principal, persona_id)
        return keyset_page(
            self.cursors, f"portraits:{principal.workspace_id}:{persona_id}:{conversation_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.workspace_id, persona_id, conversation_id, n, after),
            "created_at",
        )

    def approve(self, principal: Principal, persona_id: str, portrait_id: str) -> PortraitRecord:
        row = self._for_update(principal, persona_id, portrait_id)
        if row.canonical:
            return row
        self._repo.lock_canonical(persona_id)  # after the portrait: a lock by name comes last (docs/concurrency.md)
        if row.status not in ("generated", "approved"):
            raise _status_conflict(row, "approve")
        previous = self._repo.clear_canonical(persona_id)
        approved = self._repo.transition(row.id, ("generated", "approved"),
                                        PortraitChanges(status="approved", canonical=True))
        assert approved is not None  # the row is locked
        Outbox(self.work).emit("persona.updated", row.org_id, row.workspace_id, {
            "personaId": persona_id, "changed": ["canonicalPortrait"], "canonicalPortraitId": row.id,
            "previousCanonicalPortraitId": previous or "", "note": "",
        })
        return approved

    def reject(self, principal: Principal, persona_id: str, portrait_id: str) -> PortraitRecord:
        row = self._for_update(principal, persona_id, portrait_id)
        if row.status == "rejected":
            return row
        if row.status != "generated" or row.canonical:
            raise _status_conflict(row, "reject")
        rejected = self._repo.transition(row.id, ("generated",), PortraitChanges(status="rejected"))
        assert rejected is not None
        return rejected

    def reread(self, portrait_id: str) -> PortraitRecord | None:
        return self._repo.by_id(portrait_id, decides_nothing=True)

    # --- the render task --------------------------------------------------------------

    def start_render(self, portrait_id: str) -> RenderJob | None:
        """Mark the portrait `generating`; None when it is already settled (or gone)."""
        # Its persona first (rendered as it is held), then the portrait: personas come before portraits in the lock
        # order (docs/concurrency.md). Which persona, and whether it is an edit, never change: read unlocked.
        seen = self._repo.by_id(portrait_id, decides_nothing=True)
        if seen is None:
            return None
        persona = None if seen.parent_portrait_id is not None else self.personas.active(
            seen.workspace_id, seen.persona_id, hold=True)
        row = self._repo.transition(portrait_id, ("pending", "generating"), PortraitChanges(status="generating"))
        if row is None:
            return None
        if row.parent_portrait_id is not None:
            parent = self._repo.by_id(row.parent_portrait_id)
            return RenderJob(row, None, parent.storage_key if parent is not None else None)
        if persona is None:
            return RenderJob(row, None, None)
        name = persona.display_name or persona.soul.name
        return RenderJob(row, ImagePrompt(row.persona_id, name, persona.soul.traits, row.prompt, row.style), None)

    def finish_render(self, portrait_id: str, size: int, width: int, height: int) -> PortraitRecord | None:
        return self._repo.transition(portrait_id, ("generating",), PortraitChanges(
            status="generated", size=size, width=width, height=height, failure_code=""))

    def fail_render(self, portrait_id: str, code: str) -> PortraitRecord | None:
        return self._repo.transition(portrait_id, ("pending", "generating"),
                                    PortraitChanges(status="failed", failure_code=code))

    # --- the purge job ----------------------------------------------------------------

    def orphaned_personas(self, batch: int = 500) -> builtins.list[str]:
        """Personas with portraits that no longer exist (purged after their grace period)."""
        gone: builtins.list[str] = []
        after = ""
        while ids := self._repo.persona_ids(batch, after):
            existing = self.personas.existing(ids)
            gone += [i for i in ids if i not in existing]
            after = ids[-1]
        return gone

    def forget_personas(self, persona_ids: builtins.list[str]) -> builtins.list[PortraitRecord]:
        return self._repo.delete_for_personas(persona_ids)

    # --- helpers ----------------------------------------------------------------------

    def _add(self, principal: Principal, images_per_month: Quota, portrait_id: str, persona_id: str, *,
             conversation_id: str, style: str, prompt: str = "", instruction: str = "",
             parent_portrait_id: str | None = None) -> PortraitRecord:
        self._check_quota(principal.org_id, images_per_month)
        row = self._repo.add(NewPortrait(
            id=portrait_id, org_id=principal.org_id, workspace_id=principal.workspace_id, persona_id=persona_id,
            conversation_id=conversation_id, storage_key=object_key(principal.org_id, "portraits", persona_id,
                                                                    f"{portrait_id}.png"),
            style=style, prompt=prompt, instruction=instruction, parent_portrait_id=parent_portrait_id))
        enqueue(self.work, RENDER_TASK, principal.org_id, row.id)
        return row

    def _persona(self, principal: Principal, persona_id: str, hold: bool = False) -> PersonaRecord:
        """The persona, in the caller's workspace and not deleted (a deleted one's portraits are hidden too);
        `hold`: FOR SHARE until the portrait's write commits (a portrait made of it)."""
        persona = self.personas.active(principal.workspace_id, persona_id, hold=hold) \
            if is_uuid(persona_id) else None
        if persona is None:
            raise NotFound("persona")
        return persona

    def _editable(self, principal: Principal, persona_id: str, portrait_id: str) -> PortraitRecord:
        """The source of an edit: a generated or approved portrait of a persona that can change."""
        persona = self.personas.active(principal.workspace_id, persona_id, hold=True) \
            if is_uuid(persona_id) else None
        # Held FOR SHARE: a reject meanwhile waits for the edit, and an edit after it finds it rejected.
        source = self._repo.get(principal.workspace_id, persona_id, portrait_id, share=True) \
            if is_uuid(portrait_id) else None
        if persona is None or persona.state == "archived" or source is None or source.status not in EDITABLE:
            raise NotFound("source portrait")
        return source

    def _for_update(self, principal: Principal, persona_id: str, portrait_id: str) -> PortraitRecord:
        row = self._repo.get(principal.workspace_id, persona_id, portrait_id, for_update=True) \
            if is_uuid(portrait_id) else None
        if row is None:
            raise NotFound("portrait")
        return row

    def _moderate(self, principal: Principal, text: str, subject_type: str, subject_id: str) -> None:
        if self.moderate is None:
            return
        result = self.moderate(text)
        if not result.flagged:
            return
        review_id = record_flag(
            self.work, org_id=principal.org_id, workspace_id=principal.workspace_id, stage="input_intent",
            subject_type=subject_type, subject_id=subject_id, text=text, result=result,
        )
        err = ModerationBlocked("The instruction failed moderation.", {
            "term": result.matches[0][1] if result.matches else "",
            "scores": dict(result.scores),
            "pii": [found for category, found in result.matches if category == "pii"],
            "categories": list(result.categories), "reviewId": review_id,
        })
        err.persist = True  # the review item and its event are part of the refusal
        raise err

    def _check_quota(self, org_id: str, quota: Quota) -> None:
        """Images count in the organization's billing period (`quota`); an
        overrun's `Retry-After` is that period's end."""
        self._repo.lock_quota(org_id)  # concurrent requests of one organization count one at a time
        used = self._repo.used_since(org_id, quota.start)
        if used >= quota.limit:
            err = PortraitQuotaExceeded(
                "The monthly image quota is used up; it resets at the start of the next billing period.",
                {"used": used, "limit": quota.limit, "quota": "images_per_month", "resetAt": iso(quota.end)},
            )
            err.headers = {"retry-after": formatdate(quota.end.timestamp(), usegmt=True)}
            raise err


def _status_conflict(row: PortraitRecord, action: str) -> StateConflict:
    return StateConflict(f"A {row.status} portrait cannot be {action}d.", "status", {"status": row.status})
