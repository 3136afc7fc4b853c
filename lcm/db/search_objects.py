"""Search structures that migrations own (0002, 0010, 0028, 0031, 0032, 0035), not the models.

Postgres gets generated ``tsvector`` columns and GIN indexes; SQLite gets FTS5
virtual tables kept in sync by triggers, ``search_backlog``, the ids of
messages committed but not indexed yet (``lcm.retrieval.search_backlog``), and
``summary_search_keys``, the integer key of each summary's FTS5 rows.
None is something the domain reads or writes through the models (queries
name them in SQL), SQLite's virtual tables cannot be declared as models at
all, and a model of the SQLite-only backlog would make Postgres look one
table short, so model/schema comparisons (Alembic autogenerate,
``tests/integration/test_migrations.py``) skip them through :func:`include_name`.
"""

from __future__ import annotations

from typing import Any

TSVECTOR_COLUMN = "content_tsv"
# Postgres with pgvector only (migration 0028): the vector column and its HNSW index.
PGVECTOR_COLUMN = "embedding"
PGVECTOR_INDEX = "ix_embeddings_embedding_hnsw"
# Migration 0035: the graph of summaries alone (partial, ``WHERE target = 'summary'``).
PGVECTOR_SUMMARY_INDEX = "ix_embeddings_summary_hnsw"
SEARCH_INDEXES = frozenset(
    {
        "ix_messages_content_tsv",
        "ix_messages_content_trgm",
        "ix_summaries_content_tsv",
        "ix_summaries_content_trgm",
        # Migration 0032's replacements, where btree_gin exists: led by conversation_id.
        "ix_messages_conversation_content_tsv",
        "ix_messages_conversation_content_trgm",
        "ix_summaries_conversation_content_tsv",
        "ix_summaries_conversation_content_trgm",
        PGVECTOR_INDEX,
        PGVECTOR_SUMMARY_INDEX,
    }
)
# FTS5 tables and the shadow tables SQLite creates for them (``*_data``, ``*_idx`` …).
FTS_TABLE_PREFIXES = ("messages_fts", "messages_trigram", "summaries_fts", "summaries_trigram")
# SQLite only, so a model would make Postgres look one table short.
SQLITE_SEARCH_TABLES = frozenset({"search_backlog", "summary_search_keys"})


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic ``include_name`` hook: False for the search structures above."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(FTS_TABLE_PREFIXES) and name not in SQLITE_SEARCH_TABLES
    if type_ == "column":
        return name not in (TSVECTOR_COLUMN, PGVECTOR_COLUMN)
    if type_ == "index":
        return name not in SEARCH_INDEXES
    return True
