"""All SQL of the write path: messages, their parts, their context items."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ARRAY, String, Table, any_, cast, func, insert, select
from sqlalchemy.orm import Session

from lcm.db.models import ContextItem, Message, MessagePart

MESSAGES: Table = Message.__table__  # type: ignore[assignment]
PARTS: Table = MessagePart.__table__  # type: ignore[assignment]
CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]


class MessageRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def existing_client_ids(self, conversation_id: int, client_ids: Iterable[str]) -> set[str]:
        wanted = list(set(client_ids))
        if self.session.get_bind().dialect.name == "postgresql":
            # One array parameter: the statement text is the same for every
            # batch size, so the driver prepares it once instead of parsing an
            # IN list of a different length each time.
            return set(
                self.session.scalars(
                    select(Message.client_id).where(
                        Message.conversation_id == conversation_id,
                        Message.client_id == any_(cast(wanted, ARRAY(String))),
                    )
                )
            )
        found: set[str] = set()
        # Chunked so a 1,000-message batch never exceeds a driver's bind limit.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            found.update(
                self.session.scalars(
                    select(Message.client_id).where(
                        Message.conversation_id == conversation_id,
                        Message.client_id.in_(chunk),
                    )
                )
            )
        return found

    def insert_messages(self, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert message rows in one statement batch; ids in the order given."""
        if not rows:
            return []
        # Core inserts on the session's connection (its transaction), past
        # the ORM: these rows are never loaded as objects here, and the ORM's
        # bulk bookkeeping was a third of the write path's time.
        result = self.session.connection().execute(
            insert(MESSAGES).returning(MESSAGES.c.id, sort_by_parameter_order=True), list(rows)
        )
        return [int(r[0]) for r in result]

    def insert_parts(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.connection().execute(insert(PARTS), list(rows))

    def insert_context_items(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            self.session.connection().execute(insert(CONTEXT_ITEMS), list(rows))

    def count(self, conversation_id: int) -> int:
        return int(
            self.session.scalar(
                select(func.count())
                .select_from(Message)
                .where(Message.conversation_id == conversation_id)
            )
            or 0
        )
