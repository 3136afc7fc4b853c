"""large_files: indexes for an erase's blob check and beat's file reconciler

After an erase, ``remove_released_blobs`` asks which released blobs a file
row still names; it matched ``storage_uri`` with no index, so every erase
of a conversation with files read the whole table. It now asks among the
tenant's rows (a blob belongs to one tenant), through an index on
``(tenant_id, storage_uri)``, which replaces the one on ``tenant_id`` alone.
Beat's file reconciler looked for files without a summary, oldest first,
by reading the whole table every interval; a partial index on their
``created_at`` holds only those few.

Revision ID: 0016_large_file_indexes
Revises: 0015_grant_sweep_indexes
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_large_file_indexes"
down_revision = "0015_grant_sweep_indexes"
branch_labels = None
depends_on = None

_UNSUMMARIZED = "exploration_summary IS NULL"


def upgrade() -> None:
    op.create_index("ix_large_files_tenant_uri", "large_files", ["tenant_id", "storage_uri"])
    op.drop_index("ix_large_files_tenant_id", table_name="large_files")
    op.create_index(
        "ix_large_files_unsummarized",
        "large_files",
        ["created_at"],
        postgresql_where=sa.text(_UNSUMMARIZED),
        sqlite_where=sa.text(_UNSUMMARIZED),
    )


def downgrade() -> None:
    op.drop_index("ix_large_files_unsummarized", table_name="large_files")
    op.create_index("ix_large_files_tenant_id", "large_files", ["tenant_id"])
    op.drop_index("ix_large_files_tenant_uri", table_name="large_files")
