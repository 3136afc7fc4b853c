"""The doctor's use cases: report a tenant's unhealthy summaries, ask for their repair."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from lcm.compaction.debt_statements import REPAIR
from lcm.compaction.service import owe_compaction
from lcm.doctor.repository import DoctorRepository
from lcm.doctor.structure import DOCTOR_LIMIT, find_structural
from lcm.doctor.structure_repository import StructureRepository

__all__ = ["DOCTOR_LIMIT", "ConversationHealth", "DoctorReport", "diagnose", "request_repair"]


@dataclass(frozen=True, slots=True)
class ConversationHealth:
    conversation_id: int
    session_key: str
    broken: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    # Structural problems (lcm.doctor.structure).
    dangling_items: list[int] = field(default_factory=list)
    counters_behind: list[str] = field(default_factory=list)
    miscounted: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    conversations: list[ConversationHealth]
    broken: int
    truncated: int
    degraded: int
    dangling_items: int = 0
    counters_behind: int = 0
    miscounted: int = 0


def diagnose(
    session: Session, tenant_id: str, conversation_id: int | None = None, limit: int = DOCTOR_LIMIT
) -> DoctorReport:
    """Broken (no sources), truncated (escalation fallback) and degraded summaries,
    and structural problems (``lcm.doctor.structure``).

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
    structural = find_structural(session, tenant_id, conversation_id)
    keys = StructureRepository(session).session_keys(set(structural) - set(by_conversation))
    for cid, problems in structural.items():
        entry = by_conversation.get(cid) or ConversationHealth(cid, keys.get(cid, ""))
        by_conversation[cid] = entry
        entry.dangling_items.extend(problems.dangling_items)
        entry.counters_behind.extend(problems.counters_behind)
        entry.miscounted.extend(problems.miscounted)
    found = sorted(by_conversation.values(), key=lambda c: c.conversation_id)
    return DoctorReport(
        found,
        sum(len(c.broken) for c in found),
        sum(len(c.truncated) for c in found),
        sum(len(c.degraded) for c in found),
        sum(len(c.dangling_items) for c in found),
        sum(len(c.counters_behind) for c in found),
        sum(len(c.miscounted) for c in found),
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
