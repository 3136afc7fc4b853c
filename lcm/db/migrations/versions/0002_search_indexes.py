"""search indexes for grep

Postgres: a generated ``tsvector`` column + GIN index on messages and summaries
(full text, ``english`` configuration), and ``pg_trgm`` GIN indexes on their
content (CJK text, substring and regex prefilters).

SQLite: FTS5 tables, each pair one ``unicode61`` table (words, bm25) and one
``trigram`` table (CJK and substrings), kept in sync by triggers. The message
tables use external content (the text is stored once, in ``messages``);
summaries have no integer key that survives VACUUM, so their FTS tables keep
their own copy keyed by ``summary_id``.

A later migration that rebuilds ``messages`` or ``summaries`` on SQLite (batch
mode copies the table) must recreate the triggers below.

None of this is declared in the models: ``lcm.db.search_objects`` tells
model/schema comparisons to skip it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The tsvector only covers the first 250k characters: Postgres refuses a
# tsvector over 1 MB, and failing an ingest over search would be wrong.
# (Regex mode still reads the whole text.)
_TSVECTOR = "to_tsvector('english'::regconfig, left(content, 250000))"
_PG_TABLES = ("messages", "summaries")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgres()
    else:
        _upgrade_sqlite()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _PG_TABLES:
            op.execute(f"DROP INDEX IF EXISTS ix_{table}_content_trgm")
            op.execute(f"DROP INDEX IF EXISTS ix_{table}_content_tsv")
            op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS content_tsv")
        # pg_trgm stays: extensions are database-wide and may serve others.
        return
    for statement in _SQLITE_DOWN:
        op.execute(statement)


def _upgrade_postgres() -> None:
    # pg_trgm is a trusted extension (Postgres 13+): the database owner may create it.
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for table in _PG_TABLES:
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN content_tsv tsvector "
            f"GENERATED ALWAYS AS ({_TSVECTOR}) STORED"
        )
        op.execute(f"CREATE INDEX ix_{table}_content_tsv ON {table} USING gin (content_tsv)")
        op.execute(
            f"CREATE INDEX ix_{table}_content_trgm ON {table} USING gin (content gin_trgm_ops)"
        )


def _upgrade_sqlite() -> None:
    for statement in _SQLITE_UP:
        op.execute(statement)


_WORDS = "tokenize = 'unicode61 remove_diacritics 2'"
_TRIGRAM = "tokenize = 'trigram'"

_SQLITE_UP = [
    # Messages: external content, rowid = messages.id (an INTEGER PRIMARY KEY).
    f"CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', "
    f"content_rowid='id', {_WORDS})",
    f"CREATE VIRTUAL TABLE messages_trigram USING fts5(content, content='messages', "
    f"content_rowid='id', {_TRIGRAM})",
    """CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
    END""",
    # External-content FTS5 deletes by replaying the old values with 'delete'.
    """CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        INSERT INTO messages_trigram (messages_trigram, rowid, content)
            VALUES ('delete', old.id, old.content);
    END""",
    """CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        INSERT INTO messages_trigram (messages_trigram, rowid, content)
            VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
    END""",
    "INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')",
    "INSERT INTO messages_trigram (messages_trigram) VALUES ('rebuild')",
    # Summaries: own copy, keyed by the summary id (UNINDEXED: stored, not searched).
    f"CREATE VIRTUAL TABLE summaries_fts USING fts5(summary_id UNINDEXED, content, {_WORDS})",
    f"CREATE VIRTUAL TABLE summaries_trigram USING fts5(summary_id UNINDEXED, content, {_TRIGRAM})",
    """CREATE TRIGGER summaries_search_insert AFTER INSERT ON summaries BEGIN
        INSERT INTO summaries_fts (summary_id, content) VALUES (new.id, new.content);
        INSERT INTO summaries_trigram (summary_id, content) VALUES (new.id, new.content);
    END""",
    # Summaries are deleted only with their conversation; a scan per delete is fine.
    """CREATE TRIGGER summaries_search_delete AFTER DELETE ON summaries BEGIN
        DELETE FROM summaries_fts WHERE summary_id = old.id;
        DELETE FROM summaries_trigram WHERE summary_id = old.id;
    END""",
    """CREATE TRIGGER summaries_search_update AFTER UPDATE OF content ON summaries BEGIN
        DELETE FROM summaries_fts WHERE summary_id = old.id;
        DELETE FROM summaries_trigram WHERE summary_id = old.id;
        INSERT INTO summaries_fts (summary_id, content) VALUES (new.id, new.content);
        INSERT INTO summaries_trigram (summary_id, content) VALUES (new.id, new.content);
    END""",
    "INSERT INTO summaries_fts (summary_id, content) SELECT id, content FROM summaries",
    "INSERT INTO summaries_trigram (summary_id, content) SELECT id, content FROM summaries",
]

_SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS summaries_search_update",
    "DROP TRIGGER IF EXISTS summaries_search_delete",
    "DROP TRIGGER IF EXISTS summaries_search_insert",
    "DROP TABLE IF EXISTS summaries_trigram",
    "DROP TABLE IF EXISTS summaries_fts",
    "DROP TRIGGER IF EXISTS messages_search_update",
    "DROP TRIGGER IF EXISTS messages_search_delete",
    "DROP TRIGGER IF EXISTS messages_search_insert",
    "DROP TABLE IF EXISTS messages_trigram",
    "DROP TABLE IF EXISTS messages_fts",
]
