"""All SQL of the write path: messages, their parts, their context items."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ARRAY, String, Table, any_, bindparam, func, insert, select
from sqlalchemy.orm import Session

from lcm.db.driver import DriverStatement
from lcm.db.models import ContextItem, Message, MessagePart

MESSAGES: Table = Message.__table__  # type: ignore[assignment]
PARTS: Table = MessagePart.__table__  # type: ignore[assignment]
CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]


class MessageRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def existing_client_ids(self, conversation_id: int, client_ids: Iterable[str]) -> set[str]:
        wanted = list(set(client_ids))
        connection = self.session.connection()
        if connection.dialect.name == "postgresql":
            params = {"conversation": conversation_id, "client_ids": wanted}
            return set(_CLIENT_IDS_ANY.run(self.session, params).scalars())
        found: set[str] = set()
        # Chunked so a 1,000-message batch never exceeds a driver's bind limit.
        for start in range(0, len(wanted), 500):
            params = {"conversation": conversation_id, "client_ids": wanted[start : start + 500]}
            found.update(connection.execute(_CLIENT_IDS_IN, params).scalars())
        return found

    def insert_messages(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert message rows in one statement batch; ids in the order given."""
        if not rows:
            return []
        result = self.session.connection().execute(_INSERT_MESSAGES, list(rows))
        return [int(r[0]) for r in result]

    def insert_parts(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.connection().execute(_INSERT_PARTS, list(rows))

    def insert_context_items(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.connection().execute(_INSERT_CONTEXT_ITEMS, list(rows))

    def count(self, conversation_id: int) -> int:
        return int(
            self.session.scalar(
                select(func.count())
                .select_from(Message)
                .where(Message.conversation_id == conversation_id)
            )
            or 0
        )


# Every ingest runs these statements: they are built once, with bound
# parameters (building a statement and its cache key per call costs more CPU
# than running it), and run as Core on the session's connection (its
# transaction), past the ORM: these rows are never loaded as objects here,
# and the ORM's bulk bookkeeping was a third of the write path's time.
_IN_CONVERSATION = MESSAGES.c.conversation_id == bindparam("conversation")
# Postgres: one array parameter, so the statement text is the same for every
# batch size and the driver prepares it once instead of parsing an IN list of
# a different length each time.
_CLIENT_IDS_ANY = DriverStatement(
    select(MESSAGES.c.client_id).where(
        _IN_CONVERSATION,
        MESSAGES.c.client_id == any_(bindparam("client_ids", type_=ARRAY(String))),
    )
)
_CLIENT_IDS_IN = select(MESSAGES.c.client_id).where(
    _IN_CONVERSATION, MESSAGES.c.client_id.in_(bindparam("client_ids", expanding=True))
)
_INSERT_MESSAGES = insert(MESSAGES).returning(MESSAGES.c.id, sort_by_parameter_order=True)
_INSERT_PARTS = insert(PARTS)
_INSERT_CONTEXT_ITEMS = insert(CONTEXT_ITEMS)
