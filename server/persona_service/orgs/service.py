"""Organizations, workspaces, users and memberships."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from persona_service.kernel.api import (
    PLANS,
    NotFound,
    OrganizationOpener,
    Principal,
    ValidationFailed,
    Violation,
    Work,
    new_id,
    utcnow,
)
from persona_service.orgs.records import OrganizationRecord
from persona_service.orgs.repository import OrgRepository


class OrgService:
    def __init__(self, work: Work) -> None:
        self._repo = work.of(OrgRepository)

    def get(self, principal: Principal, org_id: str) -> OrganizationRecord:
        # Another tenant's organization is indistinguishable from a missing one.
        if org_id != principal.org_id:
            raise NotFound("organization")
        org = self._repo.get(org_id)
        if org is None:
            raise NotFound("organization")
        return org


@dataclass(frozen=True)
class Bootstrapped:
    org_id: str
    workspace_id: str
    user_id: str


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "org"


class Onboarding:
    """Creates an organization with its first workspace and its Owner, and has every module open what an
    organization has from its first moment (`openers`: `Modules.organization_openers`; billing's subscription)."""

    def __init__(self, work: Work, openers: Sequence[OrganizationOpener], *,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.work = work
        self._repo = work.of(OrgRepository)
        self.openers = openers
        self.clock = clock

    def create_org(
        self, name: str, plan: str = "pro", region: str = "us", *, owner_email: str | None = None,
        platform_admin: bool = False,
    ) -> Bootstrapped:
        violations = []
        if not name.strip():
            violations.append(Violation("orgName", "required", name, {"required": True}))
        if plan not in PLANS:
            violations.append(Violation("plan", "one_of", plan, {"oneOf": list(PLANS)}))
        if region not in ("us", "eu"):
            violations.append(Violation("region", "one_of", region, {"oneOf": ["us", "eu"]}))
        if violations:
            raise ValidationFailed(violations)
        org_id, ws_id, user_id = new_id("org"), new_id("workspace"), new_id("user")
        slug = slugify(name)
        if self._repo.slug_taken(slug):
            slug = f"{slug}-{org_id[-6:]}"
        self._repo.create_user(
            id=user_id, email=owner_email or f"owner+{user_id}@{slug}.invalid", name=f"{name} owner",
            is_platform_admin=platform_admin,
        )
        self._repo.create_org(
            id=org_id, slug=slug, name=name, region=region, data_residency_locked=region == "eu",
            plan=plan, owner_user_id=user_id,
        )
        self._repo.create_workspace(id=ws_id, org_id=org_id, slug="default", name="Default")
        self._repo.add_member(org_id, user_id, "owner")
        now = self.clock()
        for opener in self.openers:
            opener(self.work, org_id, plan, now)
        return Bootstrapped(org_id, ws_id, user_id)
