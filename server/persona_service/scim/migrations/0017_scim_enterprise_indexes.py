"""SCIM enterprise-extension filters (#32): `urn:…:enterprise:2.0:User:department
eq "x"` (and employeeNumber, costCenter, organization, division, manager.value)
read the JSONB document, so such a filter walked every user of the
organization. An index per attribute on the document's text at its path,
lowered where the attribute is case-insensitive (all but manager.value), the
expression the filter compares. Built CONCURRENTLY, as 0015's.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25 15:05:00
"""

from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'
# name -> (path under the extension, lowered)
INDEXES = {
    'ix_scim_users_employee_number': ('employeeNumber', True),
    'ix_scim_users_cost_center': ('costCenter', True),
    'ix_scim_users_organization': ('organization', True),
    'ix_scim_users_division': ('division', True),
    'ix_scim_users_department': ('department', True),
    'ix_scim_users_manager': ('manager,value', False),
}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, (path, lower) in INDEXES.items():
            value = f"(document #>> '{{{ENTERPRISE},{path}}}'::text[])"
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON scim_users (org_id, {f'lower({value})' if lower else value})")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
