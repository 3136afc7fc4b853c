"""SQLite: summaries' search rows found by an indexed key, so an erase stays linear

Migration 0002 keyed each summary's two FTS5 rows by ``summary_id``, an
``UNINDEXED`` column, and its delete and update triggers looked them up by
it: every deleted summary scanned both search tables, every tenant's
summaries. Erasing a compacted conversation cost its summaries times all
summaries stored (a 10k-message conversation: 13.4 s of a 15.7 s erase in
``DELETE FROM summaries``).

``summary_search_keys`` gives each summary an integer key (an ``INTEGER
PRIMARY KEY``: stable under ``VACUUM``, where the implicit ``rowid`` of
``summaries``, a table with a text primary key, is not) and is unique on
``summary_id``. Both FTS5 rows of a summary take that key as their
``rowid``, so the triggers reach them through two indexed lookups. The FTS5
tables are rebuilt once, with their rows keyed so; ``summary_id`` stays in
them (grep reads it). A later migration that rebuilds ``summaries`` must
recreate the triggers below (as 0002 says of its own).

Postgres is untouched: its search indexes are GIN indexes on the columns.

Revision ID: 0031_summary_search_keys
Revises: 0030_summary_source_ranges
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0031_summary_search_keys"
down_revision = "0030_summary_source_ranges"
branch_labels = None
depends_on = None

_WORDS = "tokenize = 'unicode61 remove_diacritics 2'"
_TRIGRAM = "tokenize = 'trigram'"
_TABLES = {"summaries_fts": _WORDS, "summaries_trigram": _TRIGRAM}
_TRIGGERS = ("summaries_search_insert", "summaries_search_delete", "summaries_search_update")
_KEY_OF = "(SELECT search_key FROM summary_search_keys WHERE summary_id = {row}.id)"


def _index(row: str) -> str:
    """Both FTS5 rows of summary ``row`` (new.*), under its key."""
    return " ".join(
        f"INSERT INTO {fts} (rowid, summary_id, content) "
        f"VALUES ({_KEY_OF.format(row=row)}, {row}.id, {row}.content);"
        for fts in _TABLES
    )


def _forget(row: str) -> str:
    """Both FTS5 rows of summary ``row`` (old.*), by their key: an indexed lookup each."""
    return " ".join(
        f"DELETE FROM {fts} WHERE rowid = {_KEY_OF.format(row=row)};" for fts in _TABLES
    )


_UP = [
    *(f"DROP TRIGGER IF EXISTS {t}" for t in _TRIGGERS),
    """CREATE TABLE summary_search_keys (
        search_key INTEGER PRIMARY KEY,
        summary_id VARCHAR(24) NOT NULL UNIQUE
    )""",
    "INSERT INTO summary_search_keys (summary_id) SELECT id FROM summaries ORDER BY id",
    *(f"DROP TABLE {fts}" for fts in _TABLES),
    *(
        f"CREATE VIRTUAL TABLE {fts} USING fts5(summary_id UNINDEXED, content, {tokenize})"
        for fts, tokenize in _TABLES.items()
    ),
    *(
        f"INSERT INTO {fts} (rowid, summary_id, content) "
        f"SELECT k.search_key, s.id, s.content "
        f"FROM summaries s JOIN summary_search_keys k ON k.summary_id = s.id"
        for fts in _TABLES
    ),
    # The key first: the FTS5 rows take it.
    f"""CREATE TRIGGER summaries_search_insert AFTER INSERT ON summaries BEGIN
        INSERT INTO summary_search_keys (summary_id) VALUES (new.id);
        {_index("new")}
    END""",
    # The FTS5 rows first (they are found by the key), then the key.
    f"""CREATE TRIGGER summaries_search_delete AFTER DELETE ON summaries BEGIN
        {_forget("old")}
        DELETE FROM summary_search_keys WHERE summary_id = old.id;
    END""",
    f"""CREATE TRIGGER summaries_search_update AFTER UPDATE OF content ON summaries BEGIN
        {_forget("old")}
        {_index("new")}
    END""",
]

# 0002's triggers (their rows keep the keys as rowids: 0002 finds them by summary_id).
_DOWN = [
    *(f"DROP TRIGGER IF EXISTS {t}" for t in _TRIGGERS),
    "DROP TABLE summary_search_keys",
    """CREATE TRIGGER summaries_search_insert AFTER INSERT ON summaries BEGIN
        INSERT INTO summaries_fts (summary_id, content) VALUES (new.id, new.content);
        INSERT INTO summaries_trigram (summary_id, content) VALUES (new.id, new.content);
    END""",
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
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return  # Postgres: GIN indexes on columns, no triggers
    for statement in _UP:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in _DOWN:
        op.execute(statement)
