"""A moderation review's writes at once answer as one serial order would (tests/oracle.py), through Envoy: two
platform administrators each claiming and resolving one pending item, each pair fired together behind a barrier
and compared with both serial orders (the item's status, who holds the claim, the decision and who made it)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, params, uncovered
from persona_service.kernel import ids
from persona_service.moderation.records import NewReview
from persona_service.moderation.repository import ModerationRepository
from sqlalchemy import text

QUEUE = "/v1/admin/moderation/queue"


@dataclass(frozen=True)
class Fixture:
    review: str


@pytest.fixture(scope="module")
def admins(tenants):
    return tenants(plan="pro", platform_admin=True), tenants(plan="pro", platform_admin=True)


def _fixture(engine) -> Fixture:
    """A pending item, written as moderation.service.record_flag writes one (no resolver acts on its subject)."""
    review = ids.new_id("moderation_review")
    with engine.begin() as conn:
        ModerationRepository(conn).add(NewReview(
            id=review, org_id=ids.new_id("org"), workspace_id=ids.new_id("workspace"), stage="input_intent",
            subject_type="persona_intent", subject_id="", categories=["violence"], scores={"violence": 0.9},
            excerpt="a bomb"))
    return Fixture(review)


def _ops(http, admins) -> list[Op]:
    def call(action: str, rpc: str, who: int, distinguishing: dict | None = None):
        return lambda f: http.post(f"{QUEUE}/{f.review}/{action}", json=body(rpc, distinguishing=distinguishing),
                                   headers=admins[who].auth)

    # Distinguishing: the decision (the state reads it; the generator's is always the first, `approve`).
    return [Op("claim-a", call("claim", "ClaimModerationReview", 0), "ClaimModerationReview"),
            Op("claim-b", call("claim", "ClaimModerationReview", 1), "ClaimModerationReview"),
            Op("approve-a", call("resolve", "ResolveModerationReview", 0, {"decision": "approve"}),
               "ResolveModerationReview"),
            Op("reject-b", call("resolve", "ResolveModerationReview", 1, {"decision": "reject"}),
               "ResolveModerationReview")]


def _state(engine, admins, f: Fixture):
    """Status, claim holder, decision and resolver, as the administrators' labels. From the table: the API lists
    open items only (a resolved one has no read of its own)."""
    labels = {admins[0].user_id: "a", admins[1].user_id: "b", "": ""}
    with engine.connect() as conn:
        row = conn.execute(text("SELECT status, claimed_by, decision, resolved_by FROM moderation_reviews "
                                "WHERE id = :id"), {"id": f.review}).one()
    return row.status, labels[row.claimed_by], row.decision, labels[row.resolved_by]


def _table(http, engine, admins) -> Table:
    return Table("a pending moderation review", make=lambda: _fixture(engine),
                 read=lambda f: _state(engine, admins, f), ops=_ops(http, admins))


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, engine, admins, a, b):
    assert check_named(_table(http, engine, admins), a, b) == []


def test_the_oracle_tries_every_write_of_a_review():
    assert uncovered("ModerationService", [_table(None, None, None)]) == set()
