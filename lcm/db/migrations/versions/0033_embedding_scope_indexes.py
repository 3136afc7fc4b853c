"""embeddings: the tenant index holds target too (tenant_id, model, target)

0028's ``ix_embeddings_tenant_model`` served a dense search over a tenant's
whole history. A scope of few vectors is scored exactly (every distance
sorted, ``EXACT_SEARCH_BELOW``): for a small tenant's summaries that read
the tenant's every vector through the index and dropped its messages by
``target`` row by row (tens of thousands of heap rows at 1M vectors, 66-88 ms,
where the summaries themselves are a few thousand). With ``target`` in the
index the scan reads only the scope's rows. It replaces 0028's index rather
than sitting beside it: its leading columns answer everything the old one did
(the backfill's reads by tenant and model).

Postgres builds it ``CONCURRENTLY`` (embedding jobs and erasure go on during
the build); SQLite builds it in place (its exact scan reads the same bounds).

Revision ID: 0033_embedding_scope_indexes
Revises: 0032_conversation_search_indexes
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033_embedding_scope_indexes"
down_revision = "0032_conversation_search_indexes"
branch_labels = None
depends_on = None

NEW = "ix_embeddings_tenant_model_target"
OLD = "ix_embeddings_tenant_model"


def upgrade() -> None:
    _swap(NEW, "tenant_id, model, target", OLD)


def downgrade() -> None:
    _swap(OLD, "tenant_id, model", NEW)


def _swap(name: str, columns: str, drop: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON embeddings ({columns})")
        op.execute(f"DROP INDEX IF EXISTS {drop}")
        return
    # CONCURRENTLY (outside a transaction): over millions of vectors the build
    # takes a while, and a plain CREATE INDEX would block every embedding write.
    with op.get_context().autocommit_block():
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
        if invalid:  # a failed concurrent build's leftover, which IF NOT EXISTS would keep
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON embeddings ({columns})")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {drop}")
