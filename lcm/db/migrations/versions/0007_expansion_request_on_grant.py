"""expand-query request and answer kept on the grant (task messages carry its id only)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("expansion_grants", schema=None) as batch_op:
        batch_op.add_column(sa.Column("request", _JSON, nullable=True))
        batch_op.add_column(sa.Column("answer", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("expansion_grants", schema=None) as batch_op:
        batch_op.drop_column("answer")
        batch_op.drop_column("request")
