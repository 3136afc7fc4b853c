"""The SQL of what a new session carries over: the previous context's summaries."""

from __future__ import annotations

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.orm import Session

from lcm.db.models import (
    ContextItem,
    Summary,
)

CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]


class CarryOverRepository:
    """What a new session of a family starts with (``lcm.conversations.carry_over``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def context_summaries(self, conversation_id: int, min_depth: int) -> list[tuple[str, int]]:
        """(summary id, context token count) of the context's summaries at ``min_depth``+."""
        return [
            (str(summary_id), int(tokens))
            for summary_id, tokens in self.session.execute(
                select(ContextItem.summary_id, ContextItem.token_count)
                .join(Summary, Summary.id == ContextItem.summary_id)
                .where(ContextItem.conversation_id == conversation_id, Summary.depth >= min_depth)
                .order_by(ContextItem.ordinal)
            )
        ]

    def prune_context(self, conversation_id: int, min_depth: int) -> int:
        """Remove every context item but summaries of ``min_depth`` or deeper; how many went."""
        doomed = list(
            self.session.scalars(
                select(ContextItem.id)
                .outerjoin(Summary, Summary.id == ContextItem.summary_id)
                .where(
                    ContextItem.conversation_id == conversation_id,
                    ContextItem.summary_id.is_(None) | (Summary.depth < min_depth),
                )
            )
        )
        for start in range(0, len(doomed), 500):  # within any driver's bind limit
            self.session.execute(
                delete(ContextItem).where(ContextItem.id.in_(doomed[start : start + 500]))
            )
        return len(doomed)

    def append_summary_items(
        self,
        tenant_id: str,
        conversation_id: int,
        first_ordinal: int,
        items: list[tuple[str, int]],
    ) -> None:
        self.session.execute(
            insert(CONTEXT_ITEMS),
            [
                {
                    "tenant_id": tenant_id,
                    "conversation_id": conversation_id,
                    "ordinal": first_ordinal + i,
                    "item_type": "summary",
                    "summary_id": summary_id,
                    "token_count": tokens,
                }
                for i, (summary_id, tokens) in enumerate(items)
            ],
        )
