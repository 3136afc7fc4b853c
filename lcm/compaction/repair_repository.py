"""All SQL of a summary repair: the next degraded summary, its sources, the rewrite.

The doctor (``lcm/doctor``) lists and asks for repairs; the repair pass itself
runs in the compaction chain under the debt row's lease (``repair.py``).
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from lcm.context import MessageView, SummaryView
from lcm.context_store.repository import load_message_views, summary_view
from lcm.db.models import ContextItem, Conversation, Message, Summary, SummaryMessage, SummaryParent


def has_sources() -> ColumnElement[bool]:
    """True for a summary still linked to what it summarizes (not the doctor's "broken")."""
    # summary_messages has no foreign key (migration 0012): a link to a
    # message that is gone is no source.
    messages = (
        select(SummaryMessage.message_id)
        .join(Message, Message.id == SummaryMessage.message_id)
        .where(SummaryMessage.summary_id == Summary.id)
    )
    parents = select(SummaryParent.parent_id).where(SummaryParent.summary_id == Summary.id)
    return or_(messages.exists(), parents.exists())


class RepairRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def next_to_repair(self, conversation_id: int) -> Summary | None:
        """The shallowest, oldest degraded summary with sources (leaves before what they make)."""
        return self.session.scalar(
            select(Summary)
            .where(
                Summary.conversation_id == conversation_id,
                Summary.degraded.is_not(None),
                has_sources(),
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
