"""A portrait's writes at once answer as one serial order would (tests/oracle.py), through Envoy (the shared
stack, local storage): approve, reject and edit of a generated portrait, the approval of another portrait of
the same persona (which portrait is canonical is the persona's), and a new portrait of the persona, each pair
fired together behind a barrier and compared with both serial orders (each portrait's status and canonical
mark, the edits in the first one's conversation, how many portraits the persona gained).

A second table tries the organization's monthly image quota with one image left (`images_per_month` set to 2,
one portrait made): two new portraits, or a new one and an edit, at once must answer 200 and 429 as serially.

Renders are durable tasks: the fixture waits until both portraits are generated (`support.wait_until`), and
the writes ask not to wait for their own image (`Prefer: wait=0`), which no answer here depends on."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from oracle import Answer, Op, Table, body, check_named, fixture_body, params, uncovered
from sqlalchemy import text
from support import wait_until

NO_WAIT = {"Prefer": "wait=0"}


@dataclass(frozen=True)
class Fixture:
    auth: dict[str, str]
    persona: str
    first: str
    other: str
    before: int  # the persona's portraits once both were made


def _answer(response: httpx.Response) -> Answer:
    """Status and code: the portrait error shape has the code as `error` itself (404, 422, 502)."""
    if response.status_code < 400:
        return response.status_code, ""
    error = response.json().get("error")
    return response.status_code, error if isinstance(error, str) else error.get("code", "")


def _portraits(http, f_auth: dict[str, str], persona: str, **params) -> list[dict]:
    got = http.get(f"/v1/personas/{persona}/portraits", params={"limit": 100, **params}, headers=f_auth)
    assert got.status_code == 200, got.text
    return got.json()["items"]


def _generated(http, auth: dict[str, str], persona: str) -> str:
    # (The generator's body: the state reads statuses and counts, nothing of a prompt.)
    made = http.post(f"/v1/personas/{persona}/portraits", json=fixture_body("CreatePortrait", {"persona": persona}),
                     headers={**auth, **NO_WAIT})
    assert made.status_code == 200, made.text
    pid = made.json()["id"]

    def settled():
        got = http.get(f"/v1/personas/{persona}/portraits/{pid}", headers=auth)
        assert got.status_code == 200, got.text
        assert got.json()["status"] != "failed", got.text
        return got.json()["status"] == "generated"
    wait_until(settled, what=f"portrait {pid} generated")
    return pid


def _fixture(http, tenant, persona: str) -> Fixture:
    """Two generated portraits of one persona, neither approved."""
    first, other = _generated(http, tenant.auth, persona), _generated(http, tenant.auth, persona)
    return Fixture(tenant.auth, persona, first, other, len(_portraits(http, tenant.auth, persona)))


def _ops(http) -> list[Op]:
    # The state reads the portraits' statuses and counts, no field of a body: each is the generator's.
    def post(path: str, which: str, rpc: str):
        def call(f: Fixture) -> Answer:
            pid = getattr(f, which)
            url = f"/v1/personas/{f.persona}/{path.format(id=pid)}"
            return _answer(http.post(url, json=body(rpc), headers={**f.auth, **NO_WAIT}))
        return call

    return [
        Op("approve", post("portraits/{id}/approve", "first", "ApprovePortrait"), "ApprovePortrait"),
        Op("approve-other", post("portraits/{id}/approve", "other", "ApprovePortrait"), "ApprovePortrait"),
        Op("reject", post("portraits/{id}/reject", "first", "RejectPortrait"), "RejectPortrait"),
        Op("edit", post("portrait/{id}/edit", "first", "EditPortrait"), "EditPortrait"),
        Op("create", lambda f: _answer(http.post(f"/v1/personas/{f.persona}/portraits", json=body("CreatePortrait"),
                                                 headers={**f.auth, **NO_WAIT})), "CreatePortrait"),
    ]


def _state(http, f: Fixture):
    def one(pid: str):
        got = http.get(f"/v1/personas/{f.persona}/portraits/{pid}", headers=f.auth)
        assert got.status_code == 200, got.text
        return got.json()["status"], got.json()["canonical"]

    edits = len(_portraits(http, f.auth, f.persona, conversationId=f.first)) - 1
    gained = len(_portraits(http, f.auth, f.persona)) - f.before
    return one(f.first), one(f.other), edits, gained


def _table(http, tenant, persona) -> Table:
    return Table("two generated portraits of one persona", make=lambda: _fixture(http, tenant, persona),
                 read=lambda f: _state(http, f), ops=_ops(http))


def _quota_fixture(http, tenants, engine) -> Fixture:
    """An organization with one image left this month (a quota of 2, one portrait generated)."""
    small = tenants(plan="enterprise")  # (configured before its first request: limits are cached per process)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO config_items (org_id, workspace_id, key, value, updated_by) "
                          "VALUES (:o, '', 'api.rate_limit.images_per_month', '2', 'test')"), {"o": small.org_id})
    made = http.post("/v1/personas", json=fixture_body("CreatePersona"), headers=small.auth)  # (nothing of it read)
    assert made.status_code == 200, made.text
    persona = made.json()["id"]
    first = _generated(http, small.auth, persona)
    return Fixture(small.auth, persona, first, first, len(_portraits(http, small.auth, persona)))


def _table_quota(http, tenants, engine) -> Table:
    ops = [op for op in _ops(http) if op.name in ("create", "edit")]
    return Table("one image left in the month", make=lambda: _quota_fixture(http, tenants, engine),
                 read=lambda f: len(_portraits(http, f.auth, f.persona)) - f.before, ops=ops)


@pytest.fixture
def owner(tenants):
    """An organization of its own per pair: the cap on portrait calls (120 an hour) is the pair's; Enterprise
    for an image quota no table reaches."""
    return tenants(plan="enterprise")


@pytest.fixture
def persona(http, owner) -> str:
    made = http.post("/v1/personas", json=fixture_body("CreatePersona"), headers=owner.auth)  # (nothing of it read)
    assert made.status_code == 200, made.text
    return made.json()["id"]


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, owner, persona, a, b):
    assert check_named(_table(http, owner, persona), a, b) == []


@pytest.mark.parametrize(("a", "b"), params(_table_quota(None, None, None)))
def test_two_images_at_once_for_the_last_of_the_quota_answer_as_one_serial_order(http, tenants, engine, a, b):
    assert check_named(_table_quota(http, tenants, engine), a, b) == []


def test_the_oracle_tries_every_write_of_a_portrait():
    assert uncovered("PortraitService", [_table(None, None, None)]) == set()
