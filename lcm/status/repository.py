"""The SQL behind the read-only operator views: a conversation's messages and
summaries, a page at a time, and the database-wide figures of ``lcm status``."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.db.models import CompactionDebt, ContextItem, Conversation, Message, Summary, Tenant


class BrowseRepository:
    """Reads only: never locks, never writes."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def messages(
        self,
        conversation_id: int,
        *,
        after_seq: int | None,
        role: str | None,
        since: datetime | None,
        limit: int,
        newest_first: bool = False,
    ) -> list[Message]:
        """Messages of the conversation past ``after_seq``, by seq (keyset: the
        ``(conversation_id, seq)`` key, so a page costs its size, not its offset)."""
        query = select(Message).where(Message.conversation_id == conversation_id)
        if after_seq is not None:
            query = query.where(Message.seq > after_seq)
        if role is not None:
            query = query.where(Message.role == role)
        if since is not None:
            query = query.where(Message.created_at >= since)
        order = Message.seq.desc() if newest_first else Message.seq
        return list(self.session.scalars(query.order_by(order).limit(limit)))

    def summaries(self, conversation_id: int) -> list[Summary]:
        return list(
            self.session.scalars(
                select(Summary)
                .where(Summary.conversation_id == conversation_id)
                .order_by(Summary.earliest_at, Summary.depth, Summary.id)
            )
        )

    def summaries_in_context(self, conversation_id: int) -> set[str]:
        return {
            s
            for s in self.session.scalars(
                select(ContextItem.summary_id).where(
                    ContextItem.conversation_id == conversation_id,
                    ContextItem.summary_id.is_not(None),
                )
            )
            if s is not None
        }

    def tenants(self) -> list[tuple[str, str, int]]:
        """(id, name, conversations) per tenant, by name."""
        counts = (
            select(Conversation.tenant_id, func.count().label("n"))
            .group_by(Conversation.tenant_id)
            .subquery()
        )
        rows = self.session.execute(
            select(Tenant.id, Tenant.name, func.coalesce(counts.c.n, 0))
            .outerjoin(counts, counts.c.tenant_id == Tenant.id)
            .order_by(Tenant.name)
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    def messages_by_tenant(self) -> dict[str, int]:
        rows = self.session.execute(
            select(Message.tenant_id, func.count()).group_by(Message.tenant_id)
        )
        return {r[0]: int(r[1]) for r in rows}

    def summaries_by_depth(self) -> dict[int, int]:
        rows = self.session.execute(
            select(Summary.depth, func.count()).group_by(Summary.depth).order_by(Summary.depth)
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def debt_by_status(self) -> dict[str, int]:
        rows = self.session.execute(
            select(CompactionDebt.status, func.count()).group_by(CompactionDebt.status)
        )
        return {r[0]: int(r[1]) for r in rows}

    def oldest_pending_debt(self) -> datetime | None:
        return self.session.scalar(
            select(func.min(CompactionDebt.created_at)).where(CompactionDebt.status == "pending")
        )
