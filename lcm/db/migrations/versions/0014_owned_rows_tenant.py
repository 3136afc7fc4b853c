"""message_parts, context_items: no foreign key from tenant_id to tenants

Erasing a tenant deleted its rows table by table by ``tenant_id``, and
then the tenant row. These two tables, and the two link tables, have no
index on ``tenant_id`` (they grow with every message, and their rows are
found by message, conversation or summary), so each of those deletes read
the whole table, every tenant's rows, and deleting the tenant row made
Postgres read these two once more to cascade their foreign keys. Erasing
a tenant of 2,000 messages took 87 ms beside 20,000 messages of another
tenant and 156 ms beside 120,000 (``bench erase``), growing with the
table. Erasure now deletes the rows of all four through their parents'
indexed ids (``lcm/erasure/repository.py``): 49-66 and 52-70 ms.

A part's ``message_id`` and a context item's ``conversation_id`` already
name a row of the same tenant, written with it and keeping their own
foreign keys, so the key to ``tenants`` only repeated that check on every
row an ingest or a compaction pass writes (~6 µs a row: inserting 2,000
parts took 34.5 ms with it, 22.8 without). The ``tenant_id`` column
stays: rows are distributed by it. Links lost the same key in 0011.

Revision ID: 0014_owned_rows_tenant
Revises: 0013_repeated_tenant_indexes
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0014_owned_rows_tenant"
down_revision = "0013_repeated_tenant_indexes"
branch_labels = None
depends_on = None

_TABLES = ("message_parts", "context_items")


def upgrade() -> None:
    # Batch mode: SQLite drops a constraint by rebuilding the table (neither
    # carries a trigger a rebuild would lose); Postgres alters it.
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"fk_{table}_tenant_id_tenants", type_="foreignkey")


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_foreign_key(
                f"fk_{table}_tenant_id_tenants",
                "tenants",
                ["tenant_id"],
                ["id"],
                ondelete="CASCADE",
            )
