"""secret_spans: where detected secrets sit in stored messages and large files

Ingest, imports and large files record each secret found in their text as a
span (part or file, code-point offset, length, kind, per-conversation
ordinal, keyed fingerprint); the text itself stays as sent.

Revision ID: 0023_secret_spans
Revises: 0022_llm_usage_provider
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_secret_spans"
down_revision = "0022_llm_usage_provider"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "secret_spans",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("message_id", _ID, nullable=True),
        sa.Column("part", sa.Integer(), nullable=True),
        sa.Column("file_id", sa.String(length=40), nullable=True),
        sa.Column("char_offset", sa.Integer(), nullable=False),
        sa.Column("char_length", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_secret_spans_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_secret_spans_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"],
            ["large_files.id"],
            name=op.f("fk_secret_spans_file_id_large_files"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_secret_spans")),
    )
    op.create_index(
        "ix_secret_spans_conversation_fingerprint",
        "secret_spans",
        ["conversation_id", "fingerprint"],
    )
    op.create_index("ix_secret_spans_message_id", "secret_spans", ["message_id"])
    op.create_index("ix_secret_spans_file_id", "secret_spans", ["file_id"])


def downgrade() -> None:
    op.drop_index("ix_secret_spans_file_id", table_name="secret_spans")
    op.drop_index("ix_secret_spans_message_id", table_name="secret_spans")
    op.drop_index("ix_secret_spans_conversation_fingerprint", table_name="secret_spans")
    op.drop_table("secret_spans")
