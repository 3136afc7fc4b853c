"""secret_scans and secret_scan_marks: re-scanning stored history for secrets

``lcm secrets scan`` re-detects stored messages after a detector upgrade or a
change of a tenant's rules. ``secret_scans`` is each scan's lock (the unique
tenant + active scope), lease, cursor and progress; ``secret_scan_marks``
records the detector version each conversation was last scanned with.

Revision ID: 0026_secret_scans
Revises: 0025_secret_reads_and_erasure
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_secret_scans"
down_revision = "0025_secret_reads_and_erasure"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "secret_scans",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=True),
        sa.Column("active_scope", sa.String(length=40), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("detector_version", sa.String(length=80), nullable=False),
        sa.Column("rescan_all", sa.Boolean(), nullable=False),
        sa.Column("cursor_conversation_id", sa.BigInteger(), nullable=False),
        sa.Column("cursor_message_id", sa.BigInteger(), nullable=False),
        sa.Column("ordinal_floor", sa.Integer(), nullable=False),
        sa.Column("messages_total", sa.Integer(), nullable=False),
        sa.Column("messages_done", sa.Integer(), nullable=False),
        sa.Column("conversations_done", sa.Integer(), nullable=False),
        sa.Column("spans_written", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", _AT, nullable=True),
        sa.Column("fencing_token", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("updated_at", _AT, nullable=False),
        sa.Column("finished_at", _AT, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_secret_scans_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_secret_scans_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_secret_scans")),
        sa.UniqueConstraint(
            "tenant_id", "active_scope", name=op.f("uq_secret_scans_tenant_id_active_scope")
        ),
    )
    op.create_table(
        "secret_scan_marks",
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("detector_version", sa.String(length=80), nullable=False),
        sa.Column("scanned_at", _AT, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_secret_scan_marks_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "conversation_id", name=op.f("pk_secret_scan_marks")),
    )


def downgrade() -> None:
    op.drop_table("secret_scan_marks")
    op.drop_table("secret_scans")
