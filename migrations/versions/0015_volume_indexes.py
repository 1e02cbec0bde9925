"""Indexes for every list filter at volume (#32): each filtered list walks an
index in its keyset order (equality columns first, then the sort key), so a
page reads about a page of rows whatever the table's size. Found by
tests/volume (each list's statements EXPLAINed on a seeded database).

Built CONCURRENTLY, outside the migration's transaction: writers are never
blocked (a plain CREATE INDEX holds a SHARE lock, which blocks every INSERT
and UPDATE of the table for the build: about a second per million rows on
the benchmark machine). A build that fails leaves an INVALID index; the
upgrade, run again, drops it first and builds it anew.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 12:00:00
"""

from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

# name: (table, columns or expressions, partial-index predicate)
INDEXES = {
    'ix_personas_workspace_state_created': ('personas', 'workspace_id, state, created_at, id', ''),
    'ix_personas_workspace_visibility_created': ('personas', 'workspace_id, visibility, created_at, id', ''),
    # Lineage: a root's whole tree in creation order.
    'ix_personas_root_created': ('personas', 'root_id, created_at', ''),
    'ix_chat_sessions_workspace_user_started': ('chat_sessions', 'workspace_id, user_id, started_at, id', ''),
    'ix_chat_sessions_workspace_persona_started': ('chat_sessions', 'workspace_id, persona_id, started_at, id', ''),
    'ix_chat_sessions_workspace_status_started': ('chat_sessions', 'workspace_id, status, started_at, id', ''),
    'ix_events_org_time': ('events', 'org_id, occurred_at, id', ''),
    'ix_events_org_type_time': ('events', 'org_id, type, occurred_at, id', ''),
    'ix_events_org_persona_time': ('events', "org_id, (data ->> 'personaId'), occurred_at, id", ''),
    'ix_audit_events_org_action_time': ('audit_events', 'org_id, action, occurred_at, id', ''),
    'ix_audit_events_org_actor_time': ('audit_events', 'org_id, actor_user_id, occurred_at, id', ''),
    'ix_audit_events_org_credential_time': ('audit_events', 'org_id, credential_id, occurred_at, id', ''),
    'ix_audit_events_org_resource_time': (
        'audit_events', 'org_id, resource_type, resource_id, occurred_at, id', ''),
    'ix_audit_events_org_failures': ('audit_events', 'org_id, occurred_at, id', "outcome = 'failure'"),
    'ix_moderation_reviews_open': (
        'moderation_reviews', 'created_at, id', "status IN ('pending', 'claimed')"),
    'ix_moderation_reviews_open_stage': (
        'moderation_reviews', 'stage, created_at, id', "status IN ('pending', 'claimed')"),
    # SCIM `sw` on userName: a prefix LIKE on the lowered name, whatever the collation.
    'ix_scim_users_user_name_prefix': ('scim_users', 'org_id, lower(user_name) text_pattern_ops', ''),
}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, (table, columns, where) in INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON {table} ({columns})"
                       + (f" WHERE {where}" if where else ""))


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
