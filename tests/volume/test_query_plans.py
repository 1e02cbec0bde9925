"""Every list, filter, search and lookup of the volume benchmark (#32), run
through Envoy on a seeded database (CI-sized: each big table holds many
pages), and every statement the stack ran for it EXPLAIN ANALYZEd: none may
scan a big table sequentially, sort or count more than a page's rows, or
read more than a page's rows through an index that does not fit the query."""

from __future__ import annotations

import dataclasses
import re

import pytest
from plans import reads_big_table, violations
from seeding import bench_volume, seed_volume

_NAMES = {f.name: "x" for f in dataclasses.fields(seed_volume.Seeded)}
CALLS = {c.name: c for c in bench_volume.calls(_NAMES)}

# Found by this test and not fixed by an index; each is in docs/data-volume.md.
KNOWN = {
    "scim users jump": "a SCIM startIndex no client was just walked to is an OFFSET: the index walks startIndex "
                       "entries to the page (a walk continues by keyset: `scim users deep`)",
    "scim users pr": "totalResults counts every user holding the attribute",
    "scim users dateTime": "totalResults counts every match of a range",
}
# Their generic plans (one plan for any values, which PostgreSQL may cache for a prepared
# statement) miss too: the values pick the index, a parameter cannot.
KNOWN_GENERIC = {**KNOWN}
# No index serves these values: on the CI-sized seed the plan reads more than a page, custom and generic.
NOT_INDEXABLE = {
    "marketplace q": "`Listing 42`: `42` is shorter than a trigram and `listing` is in every title, so no index "
                     "narrows the search (`marketplace q words`, every word 3 characters or more, reads the "
                     "trigram indexes)",
}
# Which index the generic plan takes depends on the statistics of the moment (ANALYZE samples rows), so
# it may pass or miss from one run to the next: not an xfail (every xfail is strict, issue 46) but a check
# of what is stable: the plan passes, or its only miss is the walk of the index named here, filtered.
UNSTABLE_GENERIC = {
    "moderation queue stage": ("ix_moderation_reviews_open",
                               "`stage = $n`: the plan may walk the open-queue partial index and filter by stage"),
    "audit action": ("ix_audit_events_org_time",
                     "an action is a parameter: the plan may walk (org_id, occurred_at) and filter, not the "
                     "(org_id, action, occurred_at) index"),
}


def _marks(name: str, generic: bool) -> list[pytest.MarkDecorator]:
    known = KNOWN_GENERIC if generic else KNOWN
    if name in known:
        return [pytest.mark.xfail(reason=known[name], strict=True)]
    if name in NOT_INDEXABLE:
        return [pytest.mark.xfail(reason=NOT_INDEXABLE[name], strict=True)]
    return []


def _tolerated(name: str, generic: bool, violation: str) -> bool:
    """An UNSTABLE_GENERIC call's documented miss: its generic plan walks the named index and filters."""
    index = UNSTABLE_GENERIC.get(name, ("", ""))[0] if generic else ""
    return bool(index) and re.fullmatch(rf"Index Scan on \w+ touches [\d.]+ rows \({index}\)", violation) is not None


@pytest.mark.parametrize("name,generic", [
    pytest.param(n, g, marks=_marks(n, g), id=f"{n}-{'generic' if g else 'custom'}") for n in CALLS for g in (False, True)
])
def test_every_statement_of_a_call_uses_an_index(name, generic, http, engine, seeded, statement_log):
    call = bench_volume.calls(seeded)[list(CALLS).index(name)]
    headers = {"Authorization": f"Bearer {seeded['api_key']}"}
    with http_as(http, headers) as client:
        start = statement_log.offset()
        params = bench_volume.resolve(client, call, depth=2)
        response = client.get(call.path, params=params)
        assert response.status_code == 200, response.text
        statements = [s for s in statement_log.since(start) if reads_big_table(s.sql)]
    found = {s.sql: v for s in statements
             if (v := [m for m in violations(engine, s, generic) if not _tolerated(name, generic, m)])}
    assert not found, "\n\n".join(f"{sql}\n  -> {'; '.join(v)}" for sql, v in found.items())


def test_a_tolerated_miss_is_only_the_documented_walk():
    assert _tolerated("audit action", True, "Index Scan on audit_events touches 1467.0 rows (ix_audit_events_org_time)")
    assert not _tolerated("audit action", False, "Index Scan on audit_events touches 1467 rows (ix_audit_events_org_time)")
    assert not _tolerated("audit action", True, "Seq Scan on audit_events")
    assert not _tolerated("audit action", True, "Index Scan on audit_events touches 9 rows (ix_audit_events_org_failures)")
    assert not _tolerated("moderation queue stage", True, "Sort of 1467 rows (created_at)")


class http_as:
    """The session's client with the seeded tenant's key on every request."""

    def __init__(self, http, headers):
        self.http, self.headers = http, headers

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get(self, path, params=None):
        return self.http.get(path, params=params, headers=self.headers)


def test_the_statement_log_sees_what_the_api_runs(http, seeded, statement_log):
    """Without this, a log that captured nothing would pass every plan check."""
    start = statement_log.offset()
    r = http.get("/v1/personas", params={"limit": 5}, headers={"Authorization": f"Bearer {seeded['api_key']}"})
    assert r.status_code == 200, r.text
    logged = [s for s in statement_log.since(start) if reads_big_table(s.sql)]
    assert any("FROM personas" in s.sql and s.params for s in logged), logged


def test_the_webhook_worker_claims_read_only_what_is_due(engine, seeded, statement_log):
    """The outbox's claim, fan-out lock and next wake-up: their cost follows
    the due rows, not the size of events and webhook_deliveries, in custom
    and generic plans (the worker runs them often: psycopg prepares them)."""
    from persona_service.kernel.clock import utcnow
    from persona_service.webhooks.repository import DeliveryQueue

    start = statement_log.offset()
    with engine.begin() as conn:
        queue = DeliveryQueue(conn)
        queue.lock_undispatched(100)
        queue.claim_due(utcnow(), 100)
        queue.next_due(utcnow())
        queue.pending_count()
        conn.rollback()
    statements = [s for s in statement_log.since(start) if reads_big_table(s.sql)]
    assert len(statements) >= 4, statements
    found = {s.sql: v for s in statements if (v := violations(engine, s) or violations(engine, s, generic=True))}
    assert not found, "\n\n".join(f"{sql}\n  -> {'; '.join(v)}" for sql, v in found.items())
