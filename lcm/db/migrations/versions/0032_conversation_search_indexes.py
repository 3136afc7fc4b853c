"""search indexes led by conversation_id (Postgres, where btree_gin exists)

Migration 0002's GIN indexes (``content_tsv``; ``content gin_trgm_ops``)
cover every conversation: grep in one conversation took the whole table's
matches from them and read each heap row to throw other conversations' away,
so its cost grew with the table. With the ``btree_gin`` extension a GIN index
also holds ``conversation_id``, and one index scan intersects the
conversation's rows with the text's matches. Postgres answers a condition on
any subset of a multicolumn GIN index's columns as well as one on that column
alone, so a grep across a tenant (no conversation) reads the text column of
these indexes as it read 0002's; they replace 0002's rather than sit beside
them (one GIN index per text column to maintain on ingest, not two).

``btree_gin`` ships in Postgres's contrib (and the embedded server's) and is
trusted (Postgres 13+): the database owner may create it. Where it is not
available the migration still succeeds and 0002's indexes stay (installing it
later: run this migration's statements, :func:`lead_with_conversation`, by hand).
The indexes are built ``CONCURRENTLY``, so ingest goes on during the build.

SQLite: nothing to do (its FTS5 tables answer by rowid, then filter by
conversation).

Revision ID: 0032_conversation_search_indexes
Revises: 0031_summary_search_keys
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032_conversation_search_indexes"
down_revision = "0031_summary_search_keys"
branch_labels = None
depends_on = None

_TABLES = ("messages", "summaries")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        lead_with_conversation()


def lead_with_conversation() -> None:
    """Swap 0002's text GIN indexes for (conversation_id, text) ones where btree_gin exists."""
    available = (
        op.get_bind()
        .execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin'"))
        .scalar()
    )
    if not available:
        return
    # CONCURRENTLY (outside a transaction): building a GIN index over a big
    # messages table takes minutes, and a plain CREATE INDEX would block every
    # ingest for that long. The old indexes serve grep until the new ones exist.
    with op.get_context().autocommit_block():
        op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        for table in _TABLES:
            _create(f"ix_{table}_conversation_content_tsv", table, "conversation_id, content_tsv")
            _create(
                f"ix_{table}_conversation_content_trgm",
                table,
                "conversation_id, content gin_trgm_ops",
            )
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_content_tsv")
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_content_trgm")


def _create(name: str, table: str, columns: str) -> None:
    """``CREATE INDEX CONCURRENTLY``, after dropping an invalid leftover of ``name``.

    A concurrent build that fails (cancelled, a deadlock, the server stopped)
    leaves an invalid index behind, which IF NOT EXISTS would then take for done.
    """
    invalid = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = :name AND NOT i.indisvalid"
            ),
            {"name": name},
        )
        .scalar()
    )
    if invalid:
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING gin ({columns})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        for table in _TABLES:
            _create(f"ix_{table}_content_tsv", table, "content_tsv")
            _create(f"ix_{table}_content_trgm", table, "content gin_trgm_ops")
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_conversation_content_tsv")
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS ix_{table}_conversation_content_trgm")
    # btree_gin stays: extensions are database-wide and may serve others.
