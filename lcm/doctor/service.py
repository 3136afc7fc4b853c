"""The doctor's use cases: report a tenant's unhealthy summaries, ask for their repair."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.compaction.debt_statements import REPAIR
from lcm.compaction.service import owe_compaction
from lcm.doctor.repository import DoctorRepository

DOCTOR_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class ConversationHealth:
    conversation_id: int
    session_key: str
    broken: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    conversations: list[ConversationHealth]
    broken: int
    truncated: int
    degraded: int


def diagnose(
    session: Session, tenant_id: str, conversation_id: int | None = None, limit: int = DOCTOR_LIMIT
) -> DoctorReport:
    """Broken (no sources), truncated (escalation fallback) and degraded summaries.

    A summary can be in several lists: a truncation made while the LLM was
    down is both truncated and degraded.
    """
    by_conversation: dict[int, ConversationHealth] = {}
    for row in DoctorRepository(session).unhealthy(tenant_id, conversation_id, limit):
        entry = by_conversation.get(row.conversation_id)
        if entry is None:
            entry = ConversationHealth(row.conversation_id, row.session_key)
            by_conversation[row.conversation_id] = entry
        for problem in row.problems:
            getattr(entry, problem).append(row.summary_id)
    found = list(by_conversation.values())
    return DoctorReport(
        found,
        sum(len(c.broken) for c in found),
        sum(len(c.truncated) for c in found),
        sum(len(c.degraded) for c in found),
    )


def request_repair(
    session: Session, tenant_id: str, conversation_id: int | None, *, mode: str
) -> list[int]:
    """Owe a repair for each conversation with degraded summaries; the ids.

    The repair is a compaction chain (reason ``repair``) on the conversation's
    one debt row, so it takes the same lease as compaction and never runs
    beside a sweep of the same conversation. Deferred mode puts a wake-up in
    the unit of work's outbox; inline mode leaves the run to the caller.
    """
    ids = DoctorRepository(session).conversations_to_repair(tenant_id, conversation_id)
    for cid in ids:
        owe_compaction(session, tenant_id, cid, REPAIR, None, mode=mode)
    return ids
