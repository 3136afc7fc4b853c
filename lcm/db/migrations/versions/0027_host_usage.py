"""host_usage: the host's own model tokens per turn, cache reads and writes included

A gateway may report on ``…/turns`` what its model call used (input, output,
and the prompt tokens its provider's cache read or wrote). One row per turn
that reported it; summed by ``GET /v1/tenant/usage`` and the console's usage
view. Billing history like ``llm_usage``: erasing a conversation unlinks them.

Revision ID: 0027_host_usage
Revises: 0026_secret_scans
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_host_usage"
down_revision = "0026_secret_scans"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "host_usage",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=True),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_host_usage_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_host_usage_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_usage")),
    )
    op.create_index(
        op.f("ix_host_usage_conversation_id"), "host_usage", ["conversation_id"], unique=False
    )
    op.create_index(
        "ix_host_usage_tenant_created", "host_usage", ["tenant_id", "created_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_host_usage_tenant_created", table_name="host_usage")
    op.drop_index(op.f("ix_host_usage_conversation_id"), table_name="host_usage")
    op.drop_table("host_usage")
