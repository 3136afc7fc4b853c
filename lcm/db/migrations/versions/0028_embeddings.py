"""embeddings: vectors of messages and summaries for semantic grep; embedding_runs (a lease)

The table is created on every database, whether or not semantic search is on,
so turning it on later (``LCM_SEMANTIC=on``) needs no migration. Vectors are
float32 bytes in ``vector``. On Postgres where the pgvector extension is
available, the migration creates it and adds ``embedding vector(384)`` with an
HNSW index (inner product: the vectors are unit length), which the
repository uses instead of ``vector``; where it is not available the
migration still succeeds and searches scan the bytes exactly (installing
pgvector later: the statements of :func:`add_pgvector_column`, then
``lcm reindex``; docs/configuration.md).

Revision ID: 0028_embeddings
Revises: 0027_host_usage
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_embeddings"
down_revision = "0027_host_usage"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "embeddings",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=40), nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("target", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=40), nullable=False),
        sa.Column("message_id", _ID, nullable=True),
        sa.Column("chunk", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=80), nullable=False),
        sa.Column("dimension", sa.Integer(), nullable=False),
        sa.Column("at", _TS, nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_embeddings_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_embeddings_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embeddings")),
        sa.UniqueConstraint(
            "source", "chunk", "model", name=op.f("uq_embeddings_source_chunk_model")
        ),
    )
    op.create_index("ix_embeddings_message_id_model", "embeddings", ["message_id", "model"])
    op.create_index(
        "ix_embeddings_conversation_id_model", "embeddings", ["conversation_id", "model"]
    )
    op.create_index("ix_embeddings_tenant_model", "embeddings", ["tenant_id", "model"])
    op.create_table(
        "embedding_runs",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("expires_at", _TS, nullable=False),
        sa.Column("model", sa.String(length=80), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("started_at", _TS, nullable=False),
        sa.Column("finished_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_embedding_runs")),
    )
    if op.get_bind().dialect.name == "postgresql":
        add_pgvector_column()


def add_pgvector_column() -> None:
    """``embedding vector(384)`` + HNSW where the server has pgvector; nothing otherwise."""
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    if not available:
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("ALTER TABLE embeddings ADD COLUMN IF NOT EXISTS embedding vector(384)")
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_embeddings_embedding_hnsw "
        "ON embeddings USING hnsw (embedding vector_ip_ops)"
    )


def downgrade() -> None:
    op.drop_table("embedding_runs")
    op.drop_index("ix_embeddings_tenant_model", table_name="embeddings")
    op.drop_index("ix_embeddings_conversation_id_model", table_name="embeddings")
    op.drop_index("ix_embeddings_message_id_model", table_name="embeddings")
    op.drop_table("embeddings")
