"""conversation activity stamp, and the indexes erasing a conversation needs

``conversations.updated_at`` is the last time messages were written to a
conversation, on the server's clock (a message's own ``created_at`` may come
from an old transcript). Listing filters on it and retention reads idleness
from it, through ``(tenant_id, updated_at)``. Existing rows start from their
newest message, else their creation.

The other indexes cover foreign keys that had none. Deleting a message makes
the database look up the context items and large files that point at it (a
cascade, a SET NULL); without an index that is a scan of the whole table per
deleted row, which turns erasing a long conversation quadratic.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# (index name, table, column) for foreign keys a delete follows.
_FK_INDEXES = (
    ("ix_context_items_message_id", "context_items", "message_id"),
    ("ix_context_items_summary_id", "context_items", "summary_id"),
    ("ix_large_files_conversation_id", "large_files", "conversation_id"),
    ("ix_large_files_message_id", "large_files", "message_id"),
    ("ix_llm_usage_conversation_id", "llm_usage", "conversation_id"),
    (
        "ix_conversation_forks_parent_conversation_id",
        "conversation_forks",
        "parent_conversation_id",
    ),
)


def upgrade() -> None:
    # SQLite adds a NOT NULL column only with a constant default; every row
    # is then set from its history, and the ORM always writes its own value.
    epoch = (
        "'1970-01-01 00:00:00+00:00'"
        if op.get_bind().dialect.name == "postgresql"
        else "'1970-01-01 00:00:00.000000'"
    )
    op.add_column(
        "conversations",
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text(epoch),
        ),
    )
    op.execute(
        "UPDATE conversations SET updated_at = COALESCE("
        "(SELECT MAX(m.created_at) FROM messages m WHERE m.conversation_id = conversations.id),"
        " created_at)"
    )
    op.create_index("ix_conversations_tenant_updated", "conversations", ["tenant_id", "updated_at"])
    for name, table, column in _FK_INDEXES:
        op.create_index(name, table, [column])


def downgrade() -> None:
    for name, table, _ in reversed(_FK_INDEXES):
        op.drop_index(name, table_name=table)
    op.drop_index("ix_conversations_tenant_updated", table_name="conversations")
    # A plain DROP COLUMN (SQLite 3.35+): a batch copy of ``conversations``
    # would drop the old table and cascade the delete into every child row.
    op.execute("ALTER TABLE conversations DROP COLUMN updated_at")
