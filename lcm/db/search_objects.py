"""Search structures that migration 0002 owns and the ORM models do not declare.

Postgres gets generated ``tsvector`` columns and GIN indexes; SQLite gets FTS5
virtual tables kept in sync by triggers. Neither is something the domain reads
or writes through the models (queries name them in SQL), and SQLite's virtual
tables cannot be declared as models at all, so model/schema comparisons
(Alembic autogenerate, ``tests/integration/test_migrations.py``) skip them
through :func:`include_name`.
"""

from __future__ import annotations

from typing import Any

TSVECTOR_COLUMN = "content_tsv"
SEARCH_INDEXES = frozenset(
    {
        "ix_messages_content_tsv",
        "ix_messages_content_trgm",
        "ix_summaries_content_tsv",
        "ix_summaries_content_trgm",
    }
)
# FTS5 tables and the shadow tables SQLite creates for them (``*_data``, ``*_idx`` …).
FTS_TABLE_PREFIXES = ("messages_fts", "messages_trigram", "summaries_fts", "summaries_trigram")


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic ``include_name`` hook: False for the search structures above."""
    if name is None:
        return True
    if type_ == "table":
        return not name.startswith(FTS_TABLE_PREFIXES)
    if type_ == "column":
        return name != TSVECTOR_COLUMN
    if type_ == "index":
        return name not in SEARCH_INDEXES
    return True
