"""A conversation's compaction status, as operators and gateways read it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from lcm.compaction.debt_repository import DebtRepository
from lcm.compaction.repository import CompactionRepository
from lcm.conversations.repository import ConversationRepository
from lcm.db.models import Conversation
from lcm.ingest.repository import MessageRepository
from lcm.policy.threshold import evaluate_threshold
from lcm.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class ConversationStatus:
    conversation_id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    summaries: dict[int, int]
    context_tokens: int
    threshold_tokens: int
    token_budget: int
    debt: dict[str, Any] | None
    last_run: dict[str, Any] | None


def conversation_status(
    session: Session, conversation: Conversation, settings: CompactionSettings, token_budget: int
) -> ConversationStatus:
    repo = CompactionRepository(session)
    conversations = ConversationRepository(session)
    messages = MessageRepository(session).count(conversation.id)
    debt = DebtRepository(session).get(conversation.id)
    budget = (debt.token_budget if debt and debt.token_budget else None) or token_budget
    tokens = repo.context_token_total(conversation.id)
    run = conversations.last_run(conversation.id)
    return ConversationStatus(
        conversation_id=conversation.id,
        session_key=conversation.session_key,
        session_id=conversation.session_id,
        archived=conversation.archived_at is not None,
        messages=messages,
        summaries=repo.summary_counts_by_depth(conversation.id),
        context_tokens=tokens,
        threshold_tokens=evaluate_threshold(tokens, budget, settings).threshold_tokens,
        token_budget=budget,
        debt=None
        if debt is None
        else {
            "status": debt.status,
            "reason": debt.reason,
            "attempts": debt.attempts,
            "last_error": debt.last_error,
            "updated_at": _iso(debt.updated_at),
            "lease_expires_at": _iso(debt.lease_expires_at),
        },
        last_run=None
        if run is None
        else {
            "kind": run.kind,
            "depth": run.depth,
            "summary_id": run.summary_id,
            "tokens_in": run.tokens_in,
            "tokens_out": run.tokens_out,
            "duration_ms": run.duration_ms,
            "escalation": run.escalation,
            "error": run.error,
            "created_at": _iso(run.created_at),
        },
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
