"""summary_operations and summaries.rewritten_at/rewrites: an operator's summary surgery

An operator may rewrite a summary (or it and the summaries below it) with
the LLM, or dissolve a condensed summary back into the summaries it was
condensed from. Both run as passes of the conversation's compaction chain,
under its lease; ``summary_operations`` is the request a caller polls. A
rewrite keeps the summary's id and links and replaces its content; the two
columns say that it was rewritten, when last, and how many times.

Revision ID: 0021_summary_surgery
Revises: 0020_expansion_leases
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0021_summary_surgery"
down_revision = "0020_expansion_leases"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMNs on both databases: a batch rebuild of ``summaries``
    # on SQLite would drop the search triggers of migration 0002.
    op.add_column("summaries", sa.Column("rewritten_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "summaries", sa.Column("rewrites", sa.Integer(), nullable=False, server_default="0")
    )
    op.create_table(
        "summary_operations",
        sa.Column("id", sa.String(length=24), nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("summary_id", sa.String(length=24), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("subtree", sa.Boolean(), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=True),
        sa.Column(
            "targets",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_summary_operations_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_summary_operations_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_summary_operations")),
    )
    op.create_index(op.f("ix_summary_operations_tenant_id"), "summary_operations", ["tenant_id"])
    op.create_index(
        "ix_summary_operations_conversation",
        "summary_operations",
        ["conversation_id", "status", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_summary_operations_conversation", table_name="summary_operations")
    op.drop_index(op.f("ix_summary_operations_tenant_id"), table_name="summary_operations")
    op.drop_table("summary_operations")
    # Plain DROP COLUMNs (SQLite 3.35+), for the same reason as above.
    op.execute("ALTER TABLE summaries DROP COLUMN rewrites")
    op.execute("ALTER TABLE summaries DROP COLUMN rewritten_at")
