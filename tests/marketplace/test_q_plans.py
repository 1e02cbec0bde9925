"""The marketplace's `q` reads the trigram indexes (migration 0028) at a
realistic size (20,000 published listings) when its words have a trigram."""

from __future__ import annotations

from persona_service.marketplace.repository import MarketplaceRepository
from plan_probe import indexes_used, rows_added

LISTINGS_SQL = ("INSERT INTO marketplace_listings (id, org_id, workspace_id, persona_id, title, description,"
                " audience_tags, price_minor, currency, status, rejection_reason, created_at, updated_at)"
                " SELECT 'lst_probe_' || g, 'org_plan_probe', 'wsp_plan_probe', 'prs_probe', 'Listing ' || g,"
                " 'About ' || g, ARRAY['education'], 100, 'usd', 'published', '',"
                " now() - g * interval '1 second', now() FROM generate_series(1, 20000) g")


def test_q_reads_the_trigram_indexes(engine):
    with rows_added(engine, LISTINGS_SQL) as conn:
        repo = MarketplaceRepository(conn)
        found = indexes_used(conn, lambda: repo.page(org_id=None, audience_tag="", words=["listing", "12345"],
                                                     limit=101, after=None))
        assert found and {"ix_listings_title_trgm", "ix_listings_description_trgm"} <= found[0], found
