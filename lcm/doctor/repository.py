"""All SQL of the doctor: finding unhealthy summaries, reading their sources, rewriting one."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from lcm.compaction.repair_repository import has_sources as _has_sources
from lcm.db.models import (
    Conversation,
    Summary,
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
