"""secret_reads and secret_spans.erased_at: the audit of original reads, erased spans

A key with the ``secrets`` scope may read originals (``with_secrets=true`` on
describe, expand and exports); each such read writes a ``secret_reads`` row.
An admin may erase a secret: its text is replaced by the placeholder and its
spans are marked ``erased_at`` (they keep their ordinal).

Revision ID: 0025_secret_reads_and_erasure
Revises: 0024_message_ids_once
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0025_secret_reads_and_erasure"
down_revision = "0024_message_ids_once"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("secret_spans", sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "secret_reads",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", _ID, nullable=True),
        sa.Column("key_name", sa.String(length=200), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("surface", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=True),
        sa.Column("span_count", sa.Integer(), nullable=False),
        sa.Column("span_ids", _JSON, nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_secret_reads_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_secret_reads")),
    )
    op.create_index("ix_secret_reads_tenant_id_id", "secret_reads", ["tenant_id", "id"])
    op.create_index("ix_secret_reads_tenant_id_read_at", "secret_reads", ["tenant_id", "read_at"])


def downgrade() -> None:
    op.drop_index("ix_secret_reads_tenant_id_read_at", table_name="secret_reads")
    op.drop_index("ix_secret_reads_tenant_id_id", table_name="secret_reads")
    op.drop_table("secret_reads")
    with op.batch_alter_table("secret_spans") as batch:
        batch.drop_column("erased_at")
