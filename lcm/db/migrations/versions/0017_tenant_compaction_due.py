"""tenants.compaction_due: the fair queue looks only among tenants that may owe compaction

A compaction wake-up picks the least recently served tenant with due debt.
It joined every tenant with its pending debt, once per pass: at 100,000
tenants 9-11 ms under Postgres's default planner costs, and 14-20 ms when
most tenants owe (``python -m bench fair_choice``). The flag marks the
tenants that may owe, and a partial index keeps them in the queue's order,
so a wake-up reads from the start of that index. Set for every tenant with
pending or running debt now.

Revision ID: 0017_tenant_compaction_due
Revises: 0016_large_file_indexes
Create Date: 2026-11-27
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0017_tenant_compaction_due"
down_revision = "0016_large_file_indexes"
branch_labels = None
depends_on = None

_NEVER_CLAIMED = datetime(1970, 1, 1, tzinfo=UTC)


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("compaction_due", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.execute(
        "UPDATE tenants SET compaction_due = true WHERE EXISTS (SELECT 1 FROM compaction_debt"
        " WHERE compaction_debt.tenant_id = tenants.id"
        " AND compaction_debt.status IN ('pending', 'running'))"
    )
    # Never claimed was null, first in the queue's order; in an index's
    # ascending order nulls come last, so it becomes the epoch.
    never = sa.bindparam("never", _NEVER_CLAIMED, type_=sa.DateTime(timezone=True))
    op.get_bind().execute(
        sa.text(
            "UPDATE tenants SET compaction_claimed_at = :never WHERE compaction_claimed_at IS NULL"
        ).bindparams(never)
    )
    op.create_index(
        "ix_tenants_compaction_due",
        "tenants",
        ["compaction_claimed_at", "id"],
        postgresql_where=sa.text("compaction_due"),
        sqlite_where=sa.text("compaction_due"),
    )


def downgrade() -> None:
    op.drop_index("ix_tenants_compaction_due", table_name="tenants")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("compaction_due")
