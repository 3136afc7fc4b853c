"""conversations.context_appends: the context versions that were appends by ingest

Ingest bumps it with ``context_version`` in the same statement; nothing else
does. So ``context_version - context_appends`` changes only when something
other than an append changed the context (a compaction pass, a repair,
surgery, a reset, an import, an erasure), and a process's cached assembly
window can be grown by the appended items instead of read again
(``lcm/window_cache.py``). Existing rows start at 0: their first window after
the upgrade is read whole, as before.

Revision ID: 0029_context_appends
Revises: 0028_embeddings
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029_context_appends"
down_revision = "0028_embeddings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("context_appends", sa.BigInteger(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("context_appends")
