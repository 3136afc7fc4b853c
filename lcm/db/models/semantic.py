"""Semantic recall: one vector per embedded text, and the lease of a backfill run."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, UtcDateTime, owned_tenant, utcnow


class Embedding(Base):
    """The vector of one chunk of a message, a summary or a large file's summary.

    ``source`` is what grep reports as ``ref`` (``msg_<id>``, ``sum_…``,
    ``file_…``); ``model`` and ``dimension`` say which embedder wrote it, so a
    model change is a set of rows under a new name (``lcm reindex``) and a
    search only compares vectors of the model it embeds the query with.
    ``vector`` holds float32 bytes (SQLite; Postgres without pgvector); where
    migration 0028 found pgvector the vector is in the ``embedding`` column
    instead (``vector(384)``, HNSW), which the model does not declare
    (``lcm.db.search_objects``).
    """

    __tablename__ = "embeddings"
    __table_args__ = (
        UniqueConstraint("source", "chunk", "model"),
        # A conversation's rows without a vector of the current model (the
        # embed job's anti-join) and erasure by conversation.
        Index("ix_embeddings_message_id_model", "message_id", "model"),
        Index("ix_embeddings_conversation_id_model", "conversation_id", "model"),
        # A dense search over all of a tenant's conversations; with target, an
        # exact search of a small scope reads only its rows (migration 0033).
        Index("ix_embeddings_tenant_model_target", "tenant_id", "model", "target"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = owned_tenant()  # its conversation's
    conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE")
    )
    target: Mapped[str] = mapped_column(String(16))  # message | summary | file
    source: Mapped[str] = mapped_column(String(40))
    message_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("messages.id", ondelete="CASCADE")
    )
    chunk: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(80))
    dimension: Mapped[int] = mapped_column(Integer)
    # What since/before compare: a message's time, a summary's newest source.
    at: Mapped[datetime] = mapped_column(UtcDateTime)
    vector: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class EmbeddingRun(Base):
    """The one backfill (reconcile or reindex) running: the row is its lease.

    ``name`` is the primary key, so two runs cannot both hold it; a run that
    died leaves a lease that expires (``lcm.semantic.backfill``).
    """

    __tablename__ = "embedding_runs"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    model: Mapped[str] = mapped_column(String(80))
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
