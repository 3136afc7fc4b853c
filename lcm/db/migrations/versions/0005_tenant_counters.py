"""tenant storage counters (quotas) and the fair compaction claim

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("stored_messages", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("stored_file_bytes", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(
            sa.Column("compaction_claimed_at", sa.DateTime(timezone=True), nullable=True)
        )
    # Counters start from what is stored now.
    op.execute(
        "UPDATE tenants SET "
        "stored_messages = (SELECT count(*) FROM messages WHERE messages.tenant_id = tenants.id), "
        "stored_file_bytes = (SELECT coalesce(sum(byte_size), 0) FROM large_files "
        "WHERE large_files.tenant_id = tenants.id)"
    )
    with op.batch_alter_table("compaction_debt", schema=None) as batch_op:
        batch_op.create_index(
            "ix_compaction_debt_fair", ["tenant_id", "status", "enqueued_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("compaction_debt", schema=None) as batch_op:
        batch_op.drop_index("ix_compaction_debt_fair")
    with op.batch_alter_table("tenants", schema=None) as batch_op:
        batch_op.drop_column("compaction_claimed_at")
        batch_op.drop_column("stored_file_bytes")
        batch_op.drop_column("stored_messages")
