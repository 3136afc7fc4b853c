"""The SQL of ``lcm doctor-clean``: a tenant's conversations as candidates, and archiving one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lcm.db.models import Conversation


@dataclass(frozen=True)
class ConversationRow:
    """What deciding whether a conversation is junk reads of it."""

    conversation_id: int
    session_key: str
    messages: int
    last_activity: datetime
    archived: bool


class JunkRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def conversations(self, tenant_id: str, idle_before: datetime | None) -> list[ConversationRow]:
        """The tenant's conversations, least recently active first (idle ones only, if asked).

        Session-key globs are matched by the caller: they are not SQL
        ``LIKE`` patterns, and an operator's sweep reads each key once.
        """
        query = select(
            Conversation.id,
            Conversation.session_key,
            Conversation.last_seq,
            Conversation.updated_at,
            Conversation.archived_at,
        ).where(Conversation.tenant_id == tenant_id)
        if idle_before is not None:
            query = query.where(Conversation.updated_at < idle_before)
        return [
            # Seqs have no gaps and messages go only with their conversation,
            # so the highest seq is the message count (as in the listing).
            ConversationRow(cid, key, last_seq, updated, archived is not None)
            for cid, key, last_seq, updated, archived in self.session.execute(
                query.order_by(Conversation.updated_at, Conversation.id)
            )
        ]

    def archive(self, conversation_id: int, when: datetime) -> bool:
        """Mark the conversation archived; False when it already was (or is gone)."""
        result = self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id, Conversation.archived_at.is_(None))
            .values(archived_at=when)
        )
        return bool(getattr(result, "rowcount", 0))
