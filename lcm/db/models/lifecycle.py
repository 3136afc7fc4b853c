"""Agent-host lifecycle: turn commits keyed by the host's advancement key, subagent forks."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from lcm.db.models.base import Base, BigId, UtcDateTime, conversation_fk, tenant_fk, utcnow


class TurnCommit(Base):
    """One accepted host turn, keyed by the host's advancement key (exactly once).

    The unique key is what makes a host's retry of ``commitTurn`` a no-op: the
    turn's messages and this row are written in one transaction, so either both
    exist or neither does.
    """

    __tablename__ = "turn_commits"
    __table_args__ = (UniqueConstraint("conversation_id", "advancement_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = tenant_fk()
    conversation_id: Mapped[int] = conversation_fk()
    advancement_key: Mapped[str] = mapped_column(String(512))
    message_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ConversationFork(Base):
    """A child conversation prepared from a parent's context (a subagent).

    ``mode`` is ``fork`` (the child starts with the parent's context: summaries
    by reference, raw messages copied) or ``isolated`` (it starts empty).
    ``status`` is ``active``, ``ended`` or ``rolled_back``.
    """

    __tablename__ = "conversation_forks"

    child_conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[str] = tenant_fk()
    parent_conversation_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    end_reason: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
