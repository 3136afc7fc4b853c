"""All SQL of summary surgery: operations, a summary's subtree, dissolving a context item.

The request side (``lcm/surgery``) adds and reads operations; the pass side
(``surgery.py``) runs them under the conversation's compaction lease.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from lcm.db.models import (
    ContextItem,
    Conversation,
    Summary,
    SummaryOperation,
    SummaryParent,
)

PENDING, DONE, FAILED = "pending", "done", "failed"


class SurgeryRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    # --- operations ---------------------------------------------------------

    def add(self, operation: SummaryOperation) -> None:
        self.session.add(operation)
        self.session.flush()

    def operation(self, operation_id: str, tenant_id: str | None) -> SummaryOperation | None:
        """The operation; ``None`` when it is not the tenant's (``tenant_id`` None: any)."""
        stmt = select(SummaryOperation).where(SummaryOperation.id == operation_id)
        if tenant_id is not None:
            stmt = stmt.where(SummaryOperation.tenant_id == tenant_id)
        return self.session.scalar(stmt)

    def next_pending(self, conversation_id: int, *, lock: bool = False) -> SummaryOperation | None:
        """The conversation's oldest pending operation (the order they were asked in)."""
        stmt = (
            select(SummaryOperation)
            .where(
                SummaryOperation.conversation_id == conversation_id,
                SummaryOperation.status == PENDING,
            )
            .order_by(SummaryOperation.created_at, SummaryOperation.id)
            .limit(1)
        )
        if lock:
            stmt = stmt.with_for_update()
        return self.session.scalar(stmt)

    # --- the DAG --------------------------------------------------------------

    def summary(self, summary_id: str, tenant_id: str | None = None) -> Summary | None:
        stmt = select(Summary).where(Summary.id == summary_id)
        if tenant_id is not None:
            stmt = stmt.where(Summary.tenant_id == tenant_id)
        return self.session.scalar(stmt)

    def summary_locked(self, summary_id: str) -> Summary | None:
        return self.session.scalar(
            select(Summary).where(Summary.id == summary_id).with_for_update()
        )

    def sources(self, summary_ids: Sequence[str]) -> dict[str, list[str]]:
        """Each condensed summary's source summaries (``summary_parents``), in order."""
        found: dict[str, list[str]] = {sid: [] for sid in summary_ids}
        rows = self.session.execute(
            select(SummaryParent.summary_id, SummaryParent.parent_id)
            .where(SummaryParent.summary_id.in_(list(summary_ids)))
            .order_by(SummaryParent.summary_id, SummaryParent.ordinal)
        )
        for summary_id, parent_id in rows:
            found[summary_id].append(parent_id)
        return found

    def subtree(self, summary_id: str) -> list[str]:
        """``summary_id`` and every summary below it, bottom-up: deepest sources first.

        Ordered by depth, then age: each summary comes after all of its sources,
        so a rewrite in this order reads rewritten sources.
        """
        seen, frontier = {summary_id}, [summary_id]
        while frontier:
            below = [p for ps in self.sources(frontier).values() for p in ps if p not in seen]
            seen.update(below)
            frontier = below
        rows = self.session.execute(
            select(Summary.id)
            .where(Summary.id.in_(seen))
            .order_by(Summary.depth, Summary.created_at, Summary.id)
        )
        return [row[0] for row in rows]

    # --- the context ------------------------------------------------------------

    def context_item(self, conversation_id: int, summary_id: str) -> ContextItem | None:
        return self.session.scalar(
            select(ContextItem).where(
                ContextItem.conversation_id == conversation_id,
                ContextItem.summary_id == summary_id,
            )
        )

    def next_ordinal_after(self, conversation_id: int, ordinal: int) -> int | None:
        return self.session.scalar(
            select(ContextItem.ordinal)
            .where(ContextItem.conversation_id == conversation_id, ContextItem.ordinal > ordinal)
            .order_by(ContextItem.ordinal)
            .limit(1)
        )

    def shift_after(self, conversation_id: int, ordinal: int, by: int) -> None:
        """Move every item after ``ordinal`` ``by`` places on, keeping their order.

        Two statements: ordinals are unique per conversation and checked row by
        row, so the items first go to negative ordinals, then to their new place.
        """
        later = (ContextItem.conversation_id == conversation_id) & (ContextItem.ordinal > ordinal)
        self.session.execute(
            update(ContextItem).where(later).values(ordinal=-(ContextItem.ordinal + by))
        )
        self.session.execute(
            update(ContextItem)
            .where(ContextItem.conversation_id == conversation_id, ContextItem.ordinal < 0)
            .values(ordinal=-ContextItem.ordinal)
        )
        self.session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(last_ordinal=Conversation.last_ordinal + by)
        )

    def replace_item(self, item: ContextItem, replacements: Sequence[ContextItem]) -> None:
        """``item`` out of the context, ``replacements`` in (their ordinals set by the caller)."""
        self.session.delete(item)
        self.session.flush()  # the ordinal is free before the first replacement takes it
        self.session.add_all(replacements)
        self.session.flush()

    def summaries(self, summary_ids: Sequence[str]) -> dict[str, Summary]:
        rows = self.session.scalars(select(Summary).where(Summary.id.in_(list(summary_ids))))
        return {s.id: s for s in rows}
