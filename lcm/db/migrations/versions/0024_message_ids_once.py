"""SQLite: a message id is never given twice (AUTOINCREMENT), so embedded mode caches views

Without ``AUTOINCREMENT`` SQLite gives a new row the largest id plus one, so
once the newest message is erased its id goes to the next one. A process's
cache of message views by id (``lcm/message_cache.py``) would then serve the
erased message in the new one's place, which is why embedded mode ran without
it and read and decoded every message of the window on every assembly. With
``AUTOINCREMENT`` SQLite remembers the largest id it ever gave
(``sqlite_sequence``), as a Postgres sequence does.

SQLite cannot change a column's declaration in place: batch mode copies the
table (ids kept, so the external-content FTS5 tables, keyed by them, stay
valid), and the search triggers on ``messages`` (0010), dropped with the old
table, are created again from their stored text. Postgres is untouched: its
ids come from a sequence already.

Revision ID: 0024_message_ids_once
Revises: 0023_secret_spans
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0024_message_ids_once"
down_revision = "0023_secret_spans"
branch_labels = None
depends_on = None


def _rebuild_messages(autoincrement: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    triggers = bind.execute(
        text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'")
    ).scalars()
    kept = list(triggers)
    with op.batch_alter_table(
        "messages", recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    ):
        pass
    for sql in kept:
        op.execute(sql)


def upgrade() -> None:
    _rebuild_messages(autoincrement=True)


def downgrade() -> None:
    _rebuild_messages(autoincrement=False)
