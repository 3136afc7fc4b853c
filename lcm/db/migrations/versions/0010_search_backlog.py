"""SQLite: index new messages for search after the ingest commits, not inside it

Until now ``messages_search_insert`` (0002) wrote every new message into the
two FTS5 tables inside the ingest transaction, and FTS5 + trigram indexing
was most of the time a big batch held SQLite's one write lock (a 1,000 x
15 KB batch: ~4.7 s, of which ~4.4 s indexing). Now inserting a message only
records its id in ``search_backlog``; after the ingest commits, short chunked
transactions move the backlog into the indexes
(``lcm.retrieval.search_backlog``), and grep reads backlog rows with plain
predicates until then, so a committed message is always found.

The delete and update triggers must know whether a row is indexed: an
external-content FTS5 table's ``'delete'`` command for a row it never
indexed corrupts the index (it subtracts entries that are not there). So
they issue it only for rows *not* in ``search_backlog``. An update indexes
the new text at once (content updates are rare and one row each).

``search_backlog`` carries no ``tenant_id``: like the FTS5 tables it is a
derived index structure of embedded mode (one machine, never distributed),
keyed by the message id. It is not declared in the models
(``lcm.db.search_objects``). Postgres is untouched: its search indexes are
GIN indexes on columns and stay on the write path.

Revision ID: 0010_search_backlog
Revises: 0009
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0010_search_backlog"
down_revision = "0009"
branch_labels = None
depends_on = None

_DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS messages_search_insert",
    "DROP TRIGGER IF EXISTS messages_search_delete",
    "DROP TRIGGER IF EXISTS messages_search_update",
]


def _forget_if_indexed(row: str) -> list[str]:
    """FTS5 'delete' of ``row`` (old.*) from both tables, only when it is indexed."""
    return [
        f"INSERT INTO {fts} ({fts}, rowid, content) "
        f"SELECT 'delete', {row}.id, {row}.content "
        f"WHERE NOT EXISTS (SELECT 1 FROM search_backlog WHERE message_id = {row}.id);"
        for fts in ("messages_fts", "messages_trigram")
    ]


_BACKLOG_UP = [
    "CREATE TABLE search_backlog (message_id INTEGER PRIMARY KEY)",
    *_DROP_TRIGGERS,
    """CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO search_backlog (message_id) VALUES (new.id);
    END""",
    # The 'delete' first (it looks at the backlog), then the backlog row.
    f"""CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN
        {" ".join(_forget_if_indexed("old"))}
        DELETE FROM search_backlog WHERE message_id = old.id;
    END""",
    f"""CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages BEGIN
        {" ".join(_forget_if_indexed("old"))}
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
        DELETE FROM search_backlog WHERE message_id = new.id;
    END""",
]

# 0002's triggers, restored by the downgrade once the backlog is indexed.
_BACKLOG_DOWN = [
    "INSERT INTO messages_fts (rowid, content) "
    "SELECT m.id, m.content FROM messages m JOIN search_backlog b ON b.message_id = m.id",
    "INSERT INTO messages_trigram (rowid, content) "
    "SELECT m.id, m.content FROM messages m JOIN search_backlog b ON b.message_id = m.id",
    *_DROP_TRIGGERS,
    "DROP TABLE search_backlog",
    """CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        INSERT INTO messages_trigram (rowid, content) VALUES (new.id, new.content);
    END""",
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
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return  # Postgres: GIN indexes on columns, maintained on the write path
    for statement in _BACKLOG_UP:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in _BACKLOG_DOWN:
        op.execute(statement)
