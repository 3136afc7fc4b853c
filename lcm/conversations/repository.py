"""All SQL about conversation rows."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lcm.db.models import Conversation


class ConversationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant_id: str, conversation_id: int) -> Conversation | None:
        return self.session.scalar(
            select(Conversation).where(
                Conversation.tenant_id == tenant_id, Conversation.id == conversation_id
            )
        )

    def find_by_session_id(
        self, tenant_id: str, session_key: str, session_id: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.session_id == session_id,
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def find_active(
        self, tenant_id: str, session_key: str, *, lock: bool = False
    ) -> Conversation | None:
        stmt = select(Conversation).where(
            Conversation.tenant_id == tenant_id,
            Conversation.session_key == session_key,
            Conversation.archived_at.is_(None),
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    def find_latest(self, tenant_id: str, session_key: str) -> Conversation | None:
        """The active conversation of a family, else its most recent one."""
        return self.session.scalar(
            select(Conversation)
            .where(Conversation.tenant_id == tenant_id, Conversation.session_key == session_key)
            .order_by(Conversation.archived_at.is_not(None), Conversation.id.desc())
            .limit(1)
        )

    def add(self, conversation: Conversation) -> Conversation:
        self.session.add(conversation)
        self.session.flush()
        return conversation

    def archive(self, conversation: Conversation, when: datetime) -> None:
        conversation.archived_at = when
        self.session.flush()

    def advance_counters(
        self, conversation_id: int, *, seq_by: int, ordinal_by: int
    ) -> tuple[int, int]:
        """Reserve ``seq_by`` seqs and ``ordinal_by`` ordinals; return the new maxima.

        Runs while the conversation row is locked by this transaction, so the
        reserved ranges are this writer's alone.
        """
        row = self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(
                last_seq=Conversation.last_seq + seq_by,
                last_ordinal=Conversation.last_ordinal + ordinal_by,
                context_version=Conversation.context_version + 1,
            )
            .returning(Conversation.last_seq, Conversation.last_ordinal)
        ).one()
        return int(row[0]), int(row[1])
