"""All SQL of the search backlog: SQLite messages committed but not in the FTS5 tables yet.

Migration 0010 makes inserting a message record its id in ``search_backlog``
instead of indexing it inside the ingest transaction; this repository moves
backlog rows into ``messages_fts`` and ``messages_trigram``, a chunk per
transaction. Postgres has no backlog (its GIN indexes are on the write path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, column, select, table, text
from sqlalchemy.orm import Session

from lcm.db.models import Message

# The two external-content FTS5 tables of messages (migration 0002).
MESSAGE_INDEXES = ("messages_fts", "messages_trigram")
BACKLOG = table("search_backlog", column("message_id"))
# Aliased: a subquery naming ``messages`` itself would be correlated with an outer query's.
_BACKLOG_MESSAGE: Any = Message.__table__.alias("backlog_message")


def backlog_ids() -> Any:
    """The ids of messages not indexed yet, for ``IN`` (grep reads them apart)."""
    return select(BACKLOG.c.message_id)


def backlog_ids_where(condition: Callable[[Any], ColumnElement[bool]]) -> Any:
    """Ids of backlog messages whose content meets ``condition``, walking the backlog.

    The content is a subquery per backlog row, not a join: without table
    statistics SQLite may otherwise walk every message and test it against
    the (small) backlog, reading all their text.
    """
    content = (
        select(_BACKLOG_MESSAGE.c.content)
        .where(_BACKLOG_MESSAGE.c.id == BACKLOG.c.message_id)
        .scalar_subquery()
    )
    return select(BACKLOG.c.message_id).where(condition(content))


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    messages: int  # backlog rows taken (their messages are now indexed)
    more: bool  # backlog rows remain after this chunk


class SearchBacklogRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    @property
    def in_use(self) -> bool:
        """True on SQLite, the one database whose search indexing is deferred."""
        return self.session.get_bind().dialect.name == "sqlite"

    def index_chunk(self, max_messages: int, max_tokens: int) -> IndexedChunk:
        """Index the oldest backlog rows (at most ``max_messages``, about ``max_tokens``).

        Must run in a write transaction (SQLite's ``BEGIN IMMEDIATE``): the
        select, both inserts and the delete then see one state of the
        backlog that no other writer can change, so two drains running at
        once take turns chunk by chunk and never index a row twice (FTS5
        would keep a duplicate entry) nor delete a row the other indexed.
        """
        # Sized by the stored token estimate: length(content) would read every
        # candidate's whole text (overflow pages) just to measure it.
        rows = self.session.execute(
            text(
                "SELECT b.message_id, coalesce(m.token_count, 0) FROM search_backlog b "
                "LEFT JOIN messages m ON m.id = b.message_id "
                "ORDER BY b.message_id LIMIT :n"
            ),
            {"n": max_messages + 1},
        ).all()
        if not rows:
            return IndexedChunk(0, False)
        taken, tokens = 0, 0
        for _message_id, count in rows[:max_messages]:
            if taken and tokens + int(count) > max_tokens:
                break  # at least one row per chunk, however long it is
            taken, tokens = taken + 1, tokens + int(count)
        last = int(rows[taken - 1][0])
        for fts in MESSAGE_INDEXES:
            # CROSS JOIN keeps the backlog as SQLite's outer loop: without table
            # statistics it walked every message (all tenants') up to :last and
            # probed the backlog for each, ~15 ms a chunk at 120k messages and
            # growing, which every writer queued behind; from the backlog it is
            # one rowid lookup per row to index (bench isolation).
            self.session.execute(
                text(
                    f"INSERT INTO {fts} (rowid, content) SELECT m.id, m.content "
                    "FROM search_backlog b CROSS JOIN messages m ON m.id = b.message_id "
                    "WHERE b.message_id <= :last"
                ),
                {"last": last},
            )
        self.session.execute(
            text("DELETE FROM search_backlog WHERE message_id <= :last"), {"last": last}
        )
        return IndexedChunk(taken, len(rows) > taken)

    def any_pending(self) -> bool:
        return self.session.scalar(select(BACKLOG.c.message_id).limit(1)) is not None
