"""Which conversations an expand-query expands, in what order, until when.

A call over one conversation expands it. A call over several (a session
family, or ``all_conversations``) ranks them by their best matches to the
query, with grep's own relevance (each conversation's best match: full
text, or hybrid where the deployment has semantic recall on), and expands the top ``K``
(``expand_query_top_conversations``): the conversations of any
``summary_ids`` first, then the ranked ones. A family's conversations
without a match are reported as ``no_match``; matched ones beyond ``K`` are
counted (``not_expanded``: 1 means "at least one"). Everything runs under one deadline, an absolute
wall-clock time so that the API and the worker host agree on it.

The plan is decided in the API (in the transaction that issues the grant) and
travels on the grant with the request, so the worker only executes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from lcm.db.models import Summary
from lcm.errors import InvalidInput
from lcm.retrieval.grep import GrepLimits, best_conversations
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.search_rows import Bounds


@dataclass(frozen=True, slots=True)
class PlannedConversation:
    conversation_id: int
    session_key: str | None
    # The best match's relevance; None when chosen for its summary ids or alone in scope.
    score: float | None = None
    summary_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExpansionPlan:
    deadline_at: float  # seconds since the epoch
    timeout_ms: int
    expand: tuple[PlannedConversation, ...]
    unmatched: tuple[PlannedConversation, ...] = ()
    not_expanded: int = 0  # matched conversations ranked below the top K

    def to_json(self) -> dict[str, Any]:
        return {
            "deadline_at": self.deadline_at,
            "timeout_ms": self.timeout_ms,
            "expand": [_entry_json(c) for c in self.expand],
            "unmatched": [_entry_json(c) for c in self.unmatched],
            "not_expanded": self.not_expanded,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExpansionPlan:
        return cls(
            deadline_at=float(data["deadline_at"]),
            timeout_ms=int(data["timeout_ms"]),
            expand=tuple(_entry(e) for e in data.get("expand") or ()),
            unmatched=tuple(_entry(e) for e in data.get("unmatched") or ()),
            not_expanded=int(data.get("not_expanded") or 0),
        )


def _entry_json(c: PlannedConversation) -> dict[str, Any]:
    return {
        "conversation_id": c.conversation_id,
        "session_key": c.session_key,
        "score": c.score,
        "summary_ids": list(c.summary_ids),
    }


def _entry(data: dict[str, Any]) -> PlannedConversation:
    return PlannedConversation(
        conversation_id=int(data["conversation_id"]),
        session_key=data.get("session_key"),
        score=data.get("score"),
        summary_ids=tuple(data.get("summary_ids") or ()),
    )


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """What a plan is made from: the scope (``None`` = every conversation) and the asks."""

    tenant_id: str
    scope_ids: Sequence[int] | None
    query: str | None
    summaries: Sequence[Summary]
    top: int


def rank_conversations(
    session: Session, bounds: Bounds, query: str, limits: GrepLimits, limit: int
) -> list[tuple[int, float]]:
    """Up to ``limit`` conversations with matches for ``query``, best first.

    Each by its best match's relevance, grep's own (full text, or hybrid
    where semantic recall is on; messages and summaries). A query full text
    cannot parse ranks nothing (hybrid ranks it by meaning): the loop still
    searches with its own terms where it runs.
    """
    try:
        return best_conversations(session, bounds, query, limits, limit)
    except InvalidInput:
        return []


def plan_expansion(
    session: Session,
    inputs: PlanInputs,
    limits: GrepLimits,
    deadline_at: float,
    timeout_ms: int,
) -> ExpansionPlan:
    """Rank the scope's conversations and pick the top ``inputs.top`` to expand."""
    by_conversation: dict[int, list[str]] = {}
    for summary in inputs.summaries:
        by_conversation.setdefault(summary.conversation_id, []).append(summary.id)
    scores: dict[int, float | None] = dict.fromkeys(by_conversation)
    scope = inputs.scope_ids
    if scope is not None and len(scope) == 1:
        scores.setdefault(scope[0], None)  # alone in scope: always expanded
    elif inputs.query:
        bounds = Bounds(inputs.tenant_id, None if scope is None else tuple(scope))
        # A family's every match (so that no_match is true of the rest); over
        # all conversations one more than fits: whether some were left out.
        wanted = inputs.top + 1 if scope is None else max(len(scope), inputs.top + 1)
        for cid, score in rank_conversations(session, bounds, inputs.query, limits, wanted):
            scores.setdefault(cid, score)
    order = list(scores)
    chosen = order[: inputs.top]
    unmatched = [] if scope is None else sorted(set(scope) - set(order))
    keys = HistoryRepository(session).session_keys(inputs.tenant_id, chosen + unmatched)

    def planned(cid: int) -> PlannedConversation:
        ids = tuple(by_conversation.get(cid, ()))
        return PlannedConversation(cid, keys.get(cid), scores.get(cid), ids)

    return ExpansionPlan(
        deadline_at=deadline_at,
        timeout_ms=timeout_ms,
        expand=tuple(planned(cid) for cid in chosen),
        unmatched=tuple(PlannedConversation(cid, keys.get(cid)) for cid in unmatched),
        not_expanded=len(order) - len(chosen),
    )
