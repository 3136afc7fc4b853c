"""All SQL of the doctor: finding unhealthy summaries, reading their sources, rewriting one."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from lcm.context import MessageView, SummaryView
from lcm.context_store.repository import load_message_views, summary_view
from lcm.db.models import (
    ContextItem,
    Conversation,
    Message,
    Summary,
    SummaryMessage,
    SummaryParent,
)


@dataclass(frozen=True, slots=True)
class SummaryHealth:
    """One summary the doctor reports, with what is wrong with it."""

    summary_id: str
    conversation_id: int
    session_key: str
    kind: str
    depth: int
    escalation: str
    model: str
    degraded: str | None
    has_sources: bool

    @property
    def problems(self) -> list[str]:
        found = []
        if not self.has_sources:
            found.append("broken")  # no link to what it summarizes: not lossless
        if self.escalation == "fallback":
            found.append("truncated")
        if self.degraded is not None:
            found.append("degraded")
        return found


def _has_sources() -> ColumnElement[bool]:
    # summary_messages has no foreign key (migration 0012): a link to a
    # message that is gone is no source.
    messages = (
        select(SummaryMessage.message_id)
        .join(Message, Message.id == SummaryMessage.message_id)
        .where(SummaryMessage.summary_id == Summary.id)
    )
    parents = select(SummaryParent.parent_id).where(SummaryParent.summary_id == Summary.id)
    return or_(messages.exists(), parents.exists())


class DoctorRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def unhealthy(
        self, tenant_id: str, conversation_id: int | None, limit: int
    ) -> list[SummaryHealth]:
        """Broken, truncated or degraded summaries of a tenant, by conversation then depth."""
        has_sources = _has_sources()
        stmt = (
            select(
                Summary.id,
                Summary.conversation_id,
                Conversation.session_key,
                Summary.kind,
                Summary.depth,
                Summary.escalation,
                Summary.model,
                Summary.degraded,
                has_sources,
            )
            .join(Conversation, Conversation.id == Summary.conversation_id)
            .where(
                Summary.tenant_id == tenant_id,
                or_(Summary.degraded.is_not(None), Summary.escalation == "fallback", ~has_sources),
            )
            .order_by(Summary.conversation_id, Summary.depth, Summary.created_at, Summary.id)
            .limit(limit)
        )
        if conversation_id is not None:
            stmt = stmt.where(Summary.conversation_id == conversation_id)
        return [SummaryHealth(*row) for row in self.session.execute(stmt)]

    def conversations_to_repair(self, tenant_id: str, conversation_id: int | None) -> list[int]:
        """Conversations holding a degraded summary that still has its sources."""
        stmt = (
            select(Summary.conversation_id)
            .where(Summary.tenant_id == tenant_id, Summary.degraded.is_not(None), _has_sources())
            .distinct()
            .order_by(Summary.conversation_id)
        )
        if conversation_id is not None:
            stmt = stmt.where(Summary.conversation_id == conversation_id)
        return list(self.session.scalars(stmt))

    def next_to_repair(self, conversation_id: int) -> Summary | None:
        """The shallowest, oldest degraded summary with sources (leaves before what they make)."""
        return self.session.scalar(
            select(Summary)
            .where(
                Summary.conversation_id == conversation_id,
                Summary.degraded.is_not(None),
                _has_sources(),
            )
            .order_by(Summary.depth, Summary.created_at, Summary.id)
            .limit(1)
        )

    def source_messages(self, summary_id: str) -> list[MessageView]:
        ids = list(
            self.session.scalars(
                select(SummaryMessage.message_id)
                .where(SummaryMessage.summary_id == summary_id)
                .order_by(SummaryMessage.ordinal)
            )
        )
        views = load_message_views(self.session, ids)
        return [views[i] for i in ids]

    def parent_ids(self, summary_id: str) -> list[str]:
        return list(
            self.session.scalars(
                select(SummaryParent.parent_id)
                .where(SummaryParent.summary_id == summary_id)
                .order_by(SummaryParent.ordinal)
            )
        )

    def source_summaries(self, summary_id: str) -> list[SummaryView]:
        ids = self.parent_ids(summary_id)
        rows = {s.id: s for s in self.session.scalars(select(Summary).where(Summary.id.in_(ids)))}
        return [summary_view(rows[i], ()) for i in ids]

    def get_locked(self, summary_id: str) -> Summary | None:
        return self.session.scalar(
            select(Summary).where(Summary.id == summary_id).with_for_update()
        )

    def set_item_tokens(self, summary_id: str, token_count: int) -> int:
        """The context items showing ``summary_id`` cost ``token_count`` now; how many there are."""
        result = self.session.execute(
            update(ContextItem)
            .where(ContextItem.summary_id == summary_id)
            .values(token_count=token_count)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def bump_context_version(self, conversation_id: int) -> None:
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(context_version=Conversation.context_version + 1)
        )
