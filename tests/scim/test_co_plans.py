"""SCIM `co` reads the trigram indexes (migration 0027) at a realistic size:
20,000 users in one organization (the CI volume seed's 2,000 are few enough
that the planner may prefer reading them all)."""

from __future__ import annotations

from persona_service.scim.filters import parse_filter
from persona_service.scim.repository import GroupRepository, UserRepository
from persona_service.scim.schemas import GROUPS, USERS
from plan_probe import indexes_used, rows_added

ORG = "org_plan_probe_scim"
USERS_SQL = (f"INSERT INTO scim_users (org_id, id, user_name, display_name, active, document, version, created_at,"
             f" updated_at) SELECT '{ORG}', 'usr_probe_' || g, 'person' || g || '@example.com', 'Person ' || g,"
             f" true, '{{}}'::jsonb, 1, now(), now() FROM generate_series(1, 20000) g")
GROUPS_SQL = (f"INSERT INTO scim_groups (id, org_id, display_name, document, version, created_at, updated_at)"
              f" SELECT 'grp_probe_' || g, '{ORG}', 'Team ' || g, '{{}}'::jsonb, 1, now(), now()"
              f" FROM generate_series(1, 20000) g")


def test_co_reads_the_trigram_index_for_the_page_and_the_count(engine):
    with rows_added(engine, USERS_SQL, GROUPS_SQL) as conn:
        users, groups = UserRepository(conn), GroupRepository(conn)
        for expression, index in (('userName co "SON12345@"', "ix_scim_users_user_name_trgm"),
                                  ('displayName co "son 1234"', "ix_scim_users_display_name_trgm")):
            where = users.where(USERS, parse_filter(expression))
            found = indexes_used(conn, lambda where=where: users.page(ORG, where, [], 0, 100))
            assert found and all(index in used for used in found), (expression, found)
        where = groups.where(GROUPS, parse_filter('displayName co "AM 1234"'))
        found = indexes_used(conn, lambda: groups.page(ORG, where, [], 0, 100))
        assert found and all("ix_scim_groups_display_name_trgm" in used for used in found), found
