"""the model and context window a conversation's turns last named (model_overrides in sweeps)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model_id", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("context_window", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("context_window")
        batch_op.drop_column("model_id")
