"""summaries.degraded: why a summary was made without the LLM (repaired by the doctor)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both databases: a batch rebuild of ``summaries``
    # on SQLite would drop the search triggers of migration 0002.
    op.add_column("summaries", sa.Column("degraded", sa.String(16), nullable=True))
    op.create_index("ix_summaries_degraded", "summaries", ["tenant_id", "degraded"])


def downgrade() -> None:
    op.drop_index("ix_summaries_degraded", table_name="summaries")
    # A plain DROP COLUMN (SQLite 3.35+), for the same reason as above.
    op.execute("ALTER TABLE summaries DROP COLUMN degraded")
