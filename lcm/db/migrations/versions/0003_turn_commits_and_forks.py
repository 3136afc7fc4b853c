"""turn commits (host advancement keys) and conversation forks (subagents)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "turn_commits",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("advancement_key", sa.String(length=512), nullable=False),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_turn_commits_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_turn_commits_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turn_commits")),
        sa.UniqueConstraint(
            "conversation_id",
            "advancement_key",
            name=op.f("uq_turn_commits_conversation_id_advancement_key"),
        ),
    )
    op.create_index(op.f("ix_turn_commits_tenant_id"), "turn_commits", ["tenant_id"])
    op.create_table(
        "conversation_forks",
        sa.Column("child_conversation_id", _ID, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("parent_conversation_id", _ID, nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["child_conversation_id"],
            ["conversations.id"],
            name=op.f("fk_conversation_forks_child_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["parent_conversation_id"],
            ["conversations.id"],
            name=op.f("fk_conversation_forks_parent_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_conversation_forks_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("child_conversation_id", name=op.f("pk_conversation_forks")),
    )
    op.create_index(op.f("ix_conversation_forks_tenant_id"), "conversation_forks", ["tenant_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_conversation_forks_tenant_id"), table_name="conversation_forks")
    op.drop_table("conversation_forks")
    op.drop_index(op.f("ix_turn_commits_tenant_id"), table_name="turn_commits")
    op.drop_table("turn_commits")
