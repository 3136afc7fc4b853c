"""summary_messages, summary_parents: no foreign key from tenant_id to tenants

A link's ``summary_id`` already names a summary of its tenant, and a
tenant's deletion reaches its links through its summaries (``ON DELETE
CASCADE`` on ``summary_id``). The foreign key to ``tenants`` only repeated
that check once per link row, on every compaction pass: a leaf pass of 120
messages spent ~0.4 ms of its commit on it (EXPLAIN ANALYZE on Postgres).
The ``tenant_id`` column stays (the rows are distributed by it).

Revision ID: 0011_link_tenant_without_fk
Revises: 0010_search_backlog
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0011_link_tenant_without_fk"
down_revision = "0010_search_backlog"
branch_labels = None
depends_on = None

_LINKS = ("summary_messages", "summary_parents")


def upgrade() -> None:
    # Batch mode: SQLite drops a constraint by rebuilding the table (these
    # two carry no triggers that a rebuild would lose); Postgres alters it.
    for table in _LINKS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"fk_{table}_tenant_id_tenants", type_="foreignkey")


def downgrade() -> None:
    for table in _LINKS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_foreign_key(
                f"fk_{table}_tenant_id_tenants",
                "tenants",
                ["tenant_id"],
                ["id"],
                ondelete="CASCADE",
            )
