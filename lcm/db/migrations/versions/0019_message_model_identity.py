"""messages.provider / messages.model: which model wrote an assistant message

A provider signs its models' thinking blocks and refuses a signature another
model made. Kept with each assistant message, the provider and model that
wrote it let assembly replay signed thinking only to that same model. Null
for messages stored before, or sent without them.

Revision ID: 0019_message_model_identity
Revises: 0018_conversation_host_cursor
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_message_model_identity"
down_revision = "0018_conversation_host_cursor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("provider", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("model", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("model")
        batch.drop_column("provider")
