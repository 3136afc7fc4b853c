"""All SQL of turn commits and conversation forks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from lcm.db.models import ContextItem, Conversation, ConversationFork, TurnCommit


class LifecycleRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def find_commit(self, conversation_id: int, advancement_key: str) -> TurnCommit | None:
        return self.session.scalar(
            select(TurnCommit).where(
                TurnCommit.conversation_id == conversation_id,
                TurnCommit.advancement_key == advancement_key,
            )
        )

    def add_commit(self, commit: TurnCommit) -> None:
        self.session.add(commit)
        self.session.flush()

    def find_fork(self, child_conversation_id: int) -> ConversationFork | None:
        return self.session.get(ConversationFork, child_conversation_id)

    def add_fork(self, fork: ConversationFork) -> None:
        self.session.add(fork)
        self.session.flush()

    def has_context(self, conversation_id: int) -> bool:
        return (
            self.session.scalar(
                select(ContextItem.ordinal).where(ContextItem.conversation_id == conversation_id)
            )
            is not None
        )

    def clear_context(self, conversation_id: int) -> None:
        """Drop every context item of the conversation (its messages stay searchable)."""
        self.session.execute(
            delete(ContextItem).where(ContextItem.conversation_id == conversation_id)
        )
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(context_version=Conversation.context_version + 1)
        )

    def archive(self, conversation_id: int, when: datetime) -> None:
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id, Conversation.archived_at.is_(None))
            .values(archived_at=when)
        )
