"""Drop three tenant_id indexes that a composite index of their table repeats

``conversations``, ``summaries`` and ``compaction_debt`` each had an index
on ``tenant_id`` alone next to a composite index that leads with it
(``ix_conversations_tenant_updated``, ``ix_summaries_degraded``,
``ix_compaction_debt_fair``). The composite index serves every lookup the
single-column one did: a tenant's rows, and the cascade when a tenant is
deleted. The single-column one only cost an entry on every insert of its
row and on every update that cannot be HOT: a debt row's claim and release
change its indexed ``status``, so each of them paid it.

Revision ID: 0013_repeated_tenant_indexes
Revises: 0012_leaf_links_without_fk
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0013_repeated_tenant_indexes"
down_revision = "0012_leaf_links_without_fk"
branch_labels = None
depends_on = None

_TABLES = ("conversations", "summaries", "compaction_debt")


def upgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_tenant_id", table_name=table)


def downgrade() -> None:
    for table in _TABLES:
        op.create_index(f"ix_{table}_tenant_id", table, ["tenant_id"])
