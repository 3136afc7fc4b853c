"""conversations.host_cursor: where the host's transcript was last imported from

A host plugin (OpenClaw) reads its own transcript through an opaque cursor
of the host's making. Kept with the conversation, in the transaction that
stores the entries read up to it, it tells the plugin after a gateway
restart which entries the server already has, so only the later ones are
sent. Null until a host sends one.

Revision ID: 0018_conversation_host_cursor
Revises: 0017_tenant_compaction_due
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_conversation_host_cursor"
down_revision = "0017_tenant_compaction_due"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("host_cursor", sa.String(length=8192), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("host_cursor")
