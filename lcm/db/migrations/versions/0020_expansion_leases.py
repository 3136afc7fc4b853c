"""expansion_leases: at most one running expand-query per caller session

A second expand-query from a session whose first one still runs is refused
(409 ``expansion_busy``). The lock must hold across API processes and worker
hosts, so it is a row: the primary key (tenant, session) admits one holder,
and ``expires_at`` frees a session whose API process died while waiting.

Revision ID: 0020_expansion_leases
Revises: 0019_message_model_identity
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_expansion_leases"
down_revision = "0019_message_model_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "expansion_leases",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("session", sa.String(length=600), nullable=False),
        sa.Column("owner", sa.String(length=40), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_expansion_leases_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "session", name=op.f("pk_expansion_leases")),
    )
    # Beat's grant sweep deletes the expired leases that no later call took over.
    op.create_index("ix_expansion_leases_expires_at", "expansion_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_expansion_leases_expires_at", table_name="expansion_leases")
    op.drop_table("expansion_leases")
