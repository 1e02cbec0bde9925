"""Search and sort on GET /v1/personas, and the generation cost preview
(POST /v1/personas/preview), through Envoy (#41; contract in
proto/persona/v1/personas.proto)."""

from __future__ import annotations

import pytest
from persona_service.kernel.data.base import table_of
from persona_service.personas.repository import PUNCTUATION, search_condition
from persona_service.personas.tables import Persona
from sqlalchemy import select, text
from support import assert_envelope

NAMES = ["Zephyr Quill", "amelia brightwater", "Bartholomew Quay", "Marguerite Lune", "Quentin Harbour"]


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


@pytest.fixture(scope="module")
def workspace(http, tenants):
    """Five personas with known names, created in NAMES order (then the second one is renamed: updated last)."""
    tenant = tenants()
    ids = []
    for name in NAMES:
        body = {"intent": f"A persona called {name} who keeps a lighthouse", "displayName": name}
        ids.append(ok(http.post("/v1/personas", json=body, headers=tenant.auth))["id"])
    ok(http.patch(f"/v1/personas/{ids[1]}", json={"displayName": "Amelia Brightwater"}, headers=tenant.auth))
    return tenant, ids


def walk(http, tenant, limit: int, **params) -> list[dict]:
    """Every page of the list, following nextCursor."""
    found, cursor = [], ""
    while True:
        page = ok(http.get("/v1/personas", params={"limit": limit, **params, **({"cursor": cursor} if cursor else {})},
                           headers=tenant.auth))
        found += page["items"]
        cursor = page["nextCursor"]
        if not cursor:
            return found


def test_sort_orders_hold_across_pages(http, workspace):
    tenant, ids = workspace
    by_name = sorted(NAMES, key=str.lower)
    by_name[by_name.index("amelia brightwater")] = "Amelia Brightwater"
    assert [p["displayName"] for p in walk(http, tenant, 2, orderBy="display_name")] == by_name
    assert [p["displayName"] for p in walk(http, tenant, 2, orderBy="display_name desc")] == by_name[::-1]
    assert [p["id"] for p in walk(http, tenant, 2, orderBy="created_at")] == ids
    assert [p["id"] for p in walk(http, tenant, 3)] == ids[::-1]  # the default: newest first
    updated = [p["id"] for p in walk(http, tenant, 2, orderBy="updated_at desc")]
    assert updated[0] == ids[1] and sorted(updated) == sorted(ids)


def test_search_is_case_insensitive_by_word_prefix(http, workspace):
    tenant, ids = workspace
    names = lambda **p: [x["displayName"] for x in walk(http, tenant, 1, orderBy="display_name", **p)]  # noqa: E731
    assert names(q="QUENT") == ["Quentin Harbour"]
    assert names(q="zeph qui") == ["Zephyr Quill"]
    assert names(q="quay bartholomew") == ["Bartholomew Quay"]
    assert names(q="Bright") == ["Amelia Brightwater"]
    assert names(q="lighthouse") == sorted(NAMES[:1] + ["Amelia Brightwater"] + NAMES[2:], key=str.lower)  # intent
    slug = ok(http.get(f"/v1/personas/{ids[3]}", headers=tenant.auth))["slug"]
    assert "Marguerite Lune" in names(q=slug)  # the slug's words
    assert names(q="nobody") == [] and names(q="%_") == []


# Names and a slug that PostgreSQL's text-search parser reads as one token each (a path, a host, an e-mail,
# a dotted name, a word and a signed integer), with intents that share none of their words (issue 48).
PUNCTUATED = {
    "A painter/poet": "Someone who paints harbours at dawn",
    "mossy.meadow": "A gardener who grows moon flowers",
    "jane@pebble.org": "A librarian who answers letters",
    "J.R.R.Tolkien": "A linguist who invents languages",
    "Double Oh Seven": "A spy who drinks weak tea",
}


@pytest.fixture(scope="module")
def punctuated(http, tenants):
    """One persona per PUNCTUATED name; the last one's slug is `agent-007`."""
    tenant = tenants()
    for name, intent in PUNCTUATED.items():
        body = {"intent": intent, "displayName": name, **({"slug": "agent-007"} if name == "Double Oh Seven" else {})}
        ok(http.post("/v1/personas", json=body, headers=tenant.auth))
    return lambda **p: [x["displayName"] for x in walk(http, tenant, 5, orderBy="display_name", **p)]


def test_search_splits_a_path_into_words(punctuated):
    assert punctuated(q="poet") == ["A painter/poet"]
    assert punctuated(q="painter/poet") == punctuated(q="paint po") == ["A painter/poet"]


def test_search_splits_a_host_into_words(punctuated):
    assert punctuated(q="meadow") == punctuated(q="mossy.meadow") == ["mossy.meadow"]


def test_search_splits_an_email_into_words(punctuated):
    assert punctuated(q="pebble") == punctuated(q="org") == punctuated(q="jane@pebble.org") == ["jane@pebble.org"]


def test_search_splits_a_dotted_name_into_words(punctuated):
    assert punctuated(q="tolkien") == punctuated(q="J.R.R.Tolk") == ["J.R.R.Tolkien"]


def test_search_finds_a_persona_by_its_whole_slug_or_a_prefix(punctuated):
    for q in ("agent-007", "agent-00", "agent-0", "AGENT-", "007"):
        assert punctuated(q=q) == ["Double Oh Seven"], q
    assert punctuated(q="agent-008") == []


def test_the_separators_are_never_letters_whatever_the_locale(engine):
    """A C-locale database knows no non-ASCII letter: `[^[:alnum:]]` would cut "José" to `jos`."""
    with engine.connect() as conn:
        for collation in ("default", "C"):
            split = conn.execute(text(f"SELECT regexp_replace(CAST(:s AS text) COLLATE \"{collation}\", "
                                      f"'{PUNCTUATION}', ' ', 'g')"), {"s": "José/Ærø.漢字_x-1"}).scalar_one()
            assert split == "José Ærø 漢字 x 1", collation


def test_a_cursor_is_bound_to_its_order_and_query(http, workspace):
    tenant, _ = workspace
    page = ok(http.get("/v1/personas", params={"limit": 1, "orderBy": "display_name"}, headers=tenant.auth))
    cursor = page["nextCursor"]
    assert_envelope(http.get("/v1/personas", params={"cursor": cursor, "orderBy": "created_at"}, headers=tenant.auth),
                    400, "bad_request")
    assert_envelope(http.get("/v1/personas", params={"cursor": cursor, "orderBy": "display_name", "q": "quill"},
                             headers=tenant.auth), 400, "bad_request")
    body = assert_envelope(http.get("/v1/personas", params={"orderBy": "slug"}, headers=tenant.auth),
                           422, "validation_failed")
    assert body["details"]["validationErrors"][0]["path"] == "orderBy"


def test_the_list_walks_an_index_for_each_order_and_the_search(engine, workspace):
    _, _ = workspace
    plans = {
        "updated": "SELECT id FROM personas WHERE workspace_id = 'w' ORDER BY updated_at DESC, id DESC LIMIT 3",
        "name": "SELECT id FROM personas WHERE workspace_id = 'w' ORDER BY lower(display_name), id LIMIT 3",
        # The condition the list's search adds, as the API runs it.
        "search": str(select(table_of(Persona).c.id).where(search_condition("agent-007 quill"))
                      .compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True})),
    }
    with engine.connect() as conn:
        # Neither a scan nor a sort: at a few rows a sort over another index costs the same as the
        # ordered index, so only a plan that walks an index in the list's order is left.
        conn.execute(text("SET enable_seqscan = off"))
        conn.execute(text("SET enable_sort = off"))
        for name, index in (("updated", "ix_personas_workspace_updated"), ("name", "ix_personas_workspace_name"),
                            ("search", "ix_personas_search_words")):
            plan = "\n".join(conn.execute(text("EXPLAIN " + plans[name])).scalars())
            assert index in plan, plan


def test_the_preview_estimates_and_spends_nothing(http, tenants, engine):
    tenant = tenants(plan="free")
    body = {"intent": "A calm astronomer who explains eclipses to children"}
    ok(http.post("/v1/personas", json=body, headers=tenant.auth))

    def counts() -> tuple[int, int, int]:
        with engine.connect() as conn:
            return tuple(conn.execute(text(f"SELECT count(*) FROM {table} WHERE org_id = :org"),
                                      {"org": tenant.org_id}).scalar_one()
                         for table in ("personas", "generation_runs", "events"))

    before = counts()
    preview = ok(http.post("/v1/personas/preview", json=body, headers=tenant.auth))
    again = ok(http.post("/v1/personas/preview", json=body, headers=tenant.auth))
    assert counts() == before and again == preview
    assert [s["step"] for s in preview["steps"]] == ["moderate_intent", "draft_soul", "write_voice", "audit",
                                                     "fingerprint"]
    assert preview["estimatedInputTokens"] == sum(s["inputTokens"] for s in preview["steps"]) > 0
    assert preview["estimatedOutputTokens"] == sum(s["outputTokens"] for s in preview["steps"]) > 0
    # The local model's price (0.5 and 1.5 USD per million tokens): cost in micro-USD.
    assert preview["model"] == "local-persona-1"
    assert preview["estimatedCostUsdMicros"] == round(preview["estimatedInputTokens"] * 0.5
                                                      + preview["estimatedOutputTokens"] * 1.5)
    quota = preview["quota"]
    assert quota["name"] == "generations_per_month" and quota["limit"] == 10 and quota["used"] == 1
    assert quota["wouldUse"] == 1 and quota["remaining"] == 9 and quota["wouldExceed"] is False
    assert quota["resetsAt"].endswith("Z")
    # A longer intent costs more; an invalid request is refused as CreatePersona refuses it.
    longer = ok(http.post("/v1/personas/preview", json={"intent": body["intent"] + " and the tides" * 20},
                          headers=tenant.auth))
    assert longer["estimatedInputTokens"] > preview["estimatedInputTokens"]
    bad = assert_envelope(http.post("/v1/personas/preview", json={"intent": "x"}, headers=tenant.auth),
                          422, "validation_failed")
    assert bad["details"]["validationErrors"][0]["path"] == "intent"


def test_a_preview_reports_a_used_up_quota_without_refusing(http, tenants):
    tenant = tenants(plan="free")
    body = {"intent": "A quiet gardener who grows moon flowers"}
    pid = ok(http.post("/v1/personas", json=body, headers=tenant.auth))["id"]
    for _ in range(9):  # regenerations count toward the quota too (and have no endpoint cap)
        ok(http.post(f"/v1/personas/{pid}/regenerate", json={"fromStep": "fingerprint"}, headers=tenant.auth))
    assert_envelope(http.post("/v1/personas", json=body, headers=tenant.auth), 429, "quota_exceeded")
    preview = ok(http.post("/v1/personas/preview", json=body, headers=tenant.auth))
    assert preview["quota"]["used"] == 10 and preview["quota"]["remaining"] == 0
    assert preview["quota"]["wouldExceed"] is True
