"""embeddings: an HNSW graph of summaries alone (Postgres with pgvector)

A dense search over a tenant's summaries walked 0028's graph of every
vector with a filter keeping only summaries (~6% of the rows at 1M vectors,
and of each step's neighbours): the walk read far to find enough of them
(41-202 ms for a big tenant's 23,500 summaries), or, below
``EXACT_SEARCH_BELOW``, every summary of the scope was scored (50-90 ms).
A partial index ``WHERE target = 'summary'`` is a graph whose neighbours are
all summaries; the statement's ``target IN ('summary')`` (one value: the
planner reads it as ``=``) lets the planner pick it, and a scope of
summaries alone is walked there (:mod:`lcm.semantic.nearest_repository`).

Postgres builds it ``CONCURRENTLY`` (embedding jobs and erasure go on during
the build): it reads every vector's row once and builds a graph of the
summaries (at 1M vectors, 59,000 summaries: well under a minute). Every
summary's vector written later is inserted into both graphs. Where the
server has no pgvector (no ``embedding`` column), and on SQLite, nothing is
done: those scan exactly.

Revision ID: 0035_embedding_summary_graph
Revises: 0034_spoken_message_vectors
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035_embedding_summary_graph"
down_revision = "0034_spoken_message_vectors"
branch_labels = None
depends_on = None

NAME = "ix_embeddings_summary_hnsw"


def upgrade() -> None:
    if not _has_vectors():
        return
    # CONCURRENTLY (outside a transaction): a plain CREATE INDEX would block
    # every embedding write for the build.
    with op.get_context().autocommit_block():
        invalid = (
            op.get_bind()
            .execute(
                sa.text(
                    "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE c.relname = :name AND NOT i.indisvalid"
                ),
                {"name": NAME},
            )
            .scalar()
        )
        if invalid:  # a failed concurrent build's leftover, which IF NOT EXISTS would keep
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON embeddings "
            "USING hnsw (embedding vector_ip_ops) WHERE target = 'summary'"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")


def _has_vectors() -> bool:
    """Postgres where migration 0028 added ``embedding vector(384)`` (pgvector present)."""
    if op.get_bind().dialect.name != "postgresql":
        return False
    found = op.get_bind().execute(
        sa.text(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'embeddings' "
            "AND column_name = 'embedding' AND table_schema = current_schema()"
        )
    )
    return bool(found.scalar())
