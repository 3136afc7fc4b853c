"""SQL behind the operator console: the reads no other feature already makes.

Every query is bounded (a page, a ``LIMIT``) and filtered by tenant, so a
page costs the same on a conversation of 20 or 20,000 messages, and an id of
another tenant reads exactly like a missing one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from lcm.db.models import CompactionDebt, CompactionRun, ContextItem, Conversation, Message, Summary

SortColumn = Literal["id", "key", "messages", "tokens", "updated"]


@dataclass(frozen=True, slots=True)
class ConversationRow:
    id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    context_tokens: int
    updated_at: datetime
    debt_status: str | None
    debt_budget: int | None
    debt_updated_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunRow:
    id: int
    kind: str
    depth: int
    summary_id: str | None
    tokens_in: int
    tokens_out: int
    duration_ms: int
    escalation: str | None
    error: str | None
    created_at: datetime
    model: str | None


@dataclass(frozen=True, slots=True)
class DebtRow:
    conversation_id: int
    session_key: str
    status: str
    reason: str
    attempts: int
    last_error: str | None
    updated_at: datetime
    lease_expires_at: datetime | None


class ConsoleRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def conversation_page(
        self,
        tenant_id: str,
        *,
        key_prefix: str | None,
        sort: SortColumn,
        descending: bool,
        offset: int,
        limit: int,
    ) -> tuple[list[ConversationRow], int]:
        """One page of the tenant's conversations in the asked order, and how many there are."""
        tokens = (
            select(func.coalesce(func.sum(ContextItem.token_count), 0))
            .where(ContextItem.conversation_id == Conversation.id)
            .scalar_subquery()
        )
        where = [Conversation.tenant_id == tenant_id]
        if key_prefix:
            # substr, not LIKE: exact on both databases and nothing to escape.
            where.append(func.substr(Conversation.session_key, 1, len(key_prefix)) == key_prefix)
        column = {
            "id": Conversation.id,
            "key": Conversation.session_key,
            "messages": Conversation.last_seq,
            "tokens": tokens,
            "updated": Conversation.updated_at,
        }[sort]
        order = [column.desc() if descending else column.asc(), Conversation.id.desc()]
        stmt = (
            select(
                Conversation,
                tokens,
                CompactionDebt.status,
                CompactionDebt.token_budget,
                CompactionDebt.updated_at,
            )
            .outerjoin(CompactionDebt, CompactionDebt.conversation_id == Conversation.id)
            .where(*where)
            .order_by(*order)
            .offset(offset)
            .limit(limit)
        )
        rows = [
            ConversationRow(
                c.id,
                c.session_key,
                c.session_id,
                c.archived_at is not None,
                c.last_seq,  # seqs are gap-free: the last one handed out is the count
                int(t),
                c.updated_at,
                status,
                budget,
                debt_at,
            )
            for c, t, status, budget, debt_at in self.session.execute(stmt)
        ]
        total = self.session.scalar(select(func.count()).select_from(Conversation).where(*where))
        return rows, int(total or 0)

    def summaries_by_depth(self, conversation_ids: Sequence[int]) -> dict[int, dict[int, int]]:
        found: dict[int, dict[int, int]] = defaultdict(dict)
        if conversation_ids:
            for cid, depth, count in self.session.execute(
                select(Summary.conversation_id, Summary.depth, func.count())
                .where(Summary.conversation_id.in_(conversation_ids))
                .group_by(Summary.conversation_id, Summary.depth)
            ):
                found[int(cid)][int(depth)] = int(count)
        return found

    def last_runs(self, conversation_ids: Sequence[int]) -> dict[int, datetime]:
        if not conversation_ids:
            return {}
        return {
            int(cid): at
            for cid, at in self.session.execute(
                select(CompactionRun.conversation_id, func.max(CompactionRun.created_at))
                .where(CompactionRun.conversation_id.in_(conversation_ids))
                .group_by(CompactionRun.conversation_id)
            )
        }

    def runs(self, conversation_id: int, *, offset: int, limit: int) -> tuple[list[RunRow], int]:
        """The conversation's compaction passes, newest first, with the model that wrote each."""
        stmt = (
            select(CompactionRun, Summary.model)
            .outerjoin(Summary, Summary.id == CompactionRun.summary_id)
            .where(CompactionRun.conversation_id == conversation_id)
            .order_by(CompactionRun.id.desc())
            .offset(offset)
            .limit(limit)
        )
        rows = [
            RunRow(
                r.id,
                r.kind,
                r.depth,
                r.summary_id,
                r.tokens_in,
                r.tokens_out,
                r.duration_ms,
                r.escalation,
                r.error,
                r.created_at,
                model,
            )
            for r, model in self.session.execute(stmt)
        ]
        total = self.session.scalar(
            select(func.count())
            .select_from(CompactionRun)
            .where(CompactionRun.conversation_id == conversation_id)
        )
        return rows, int(total or 0)

    def debts(self, tenant_id: str, statuses: Sequence[str], limit: int) -> list[DebtRow]:
        """The tenant's debt rows of the given statuses, oldest change first."""
        stmt = (
            select(CompactionDebt, Conversation.session_key)
            .join(Conversation, Conversation.id == CompactionDebt.conversation_id)
            .where(CompactionDebt.tenant_id == tenant_id, CompactionDebt.status.in_(statuses))
            .order_by(CompactionDebt.updated_at, CompactionDebt.conversation_id)
            .limit(limit)
        )
        return [
            DebtRow(
                d.conversation_id,
                key,
                d.status,
                d.reason,
                d.attempts,
                d.last_error,
                d.updated_at,
                d.lease_expires_at,
            )
            for d, key in self.session.execute(stmt)
        ]

    def debt_counts(self, tenant_id: str) -> dict[str, int]:
        return {
            str(status): int(count)
            for status, count in self.session.execute(
                select(CompactionDebt.status, func.count())
                .where(CompactionDebt.tenant_id == tenant_id)
                .group_by(CompactionDebt.status)
            )
        }

    def message_ids(self, conversation_id: int, first_seq: int, last_seq: int) -> list[int]:
        """Ids of the messages with seq in ``[first_seq, last_seq]``, in order."""
        return list(
            self.session.scalars(
                select(Message.id)
                .where(
                    Message.conversation_id == conversation_id,
                    Message.seq >= first_seq,
                    Message.seq <= last_seq,
                )
                .order_by(Message.seq)
            )
        )
