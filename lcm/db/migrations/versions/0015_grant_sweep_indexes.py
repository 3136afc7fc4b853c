"""expansion_grants: indexes for beat's sweep

The sweep revokes grants past their expiry and deletes those that ended a
retention period ago (``lcm.retrieval.grants.sweep_grants``). Neither
``expires_at`` nor ``created_at`` had an index, so both statements read the
whole table, a day of grants at the default retention, every five minutes.
The revoke now reads a partial index of the live grants' expiry; the delete
reads the grants created before its cutoff.

Revision ID: 0015_grant_sweep_indexes
Revises: 0014_owned_rows_tenant
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_grant_sweep_indexes"
down_revision = "0014_owned_rows_tenant"
branch_labels = None
depends_on = None

_LIVE = "revoked IS false"


def upgrade() -> None:
    op.create_index(
        "ix_expansion_grants_live_expiry",
        "expansion_grants",
        ["expires_at"],
        postgresql_where=sa.text(_LIVE),
        sqlite_where=sa.text(_LIVE),
    )
    op.create_index("ix_expansion_grants_created_at", "expansion_grants", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_expansion_grants_created_at", table_name="expansion_grants")
    op.drop_index("ix_expansion_grants_live_expiry", table_name="expansion_grants")
