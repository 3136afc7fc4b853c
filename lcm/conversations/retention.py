"""What a new session of a family starts with: ``new_session_retain_depth``.

When a new ``session_id`` archives the live conversation, the new
conversation's context may start with summaries of the archived one:

* ``-1`` (default): nothing; the new session starts empty (a real ``/reset``).
  The archived history stays searchable through the family-scoped tools.
* ``0``: every summary in the archived conversation's context, any depth.
* ``N > 0``: only the summaries of depth ``N`` or more in that context, i.e. the
  durable, condensed layers; a conversation never condensed that deep carries
  nothing.

Raw messages never carry over, and nothing is copied: the new context items
point at the archived conversation's summaries, in their original order, so
``expand`` and ``describe`` on them still reach the original messages.

This differs from lossless-claw for ``-1`` only (there it keeps the whole
context, raw messages included): here a new session is a new conversation,
and sharing raw messages across conversations would make each conversation's
history no longer its own.
"""

from __future__ import annotations

from sqlalchemy import Table, delete, insert, select
from sqlalchemy.orm import Session

from lcm.conversations.repository import ConversationRepository
from lcm.db.models import ContextItem, Summary

CONTEXT_ITEMS: Table = ContextItem.__table__  # type: ignore[assignment]


class RetentionRepository:
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


def carry_summaries(
    session: Session,
    tenant_id: str,
    archived_id: int,
    new_conversation_id: int,
    retain_depth: int,
) -> int:
    """Start the new conversation's context with the retained summaries; return how many."""
    if retain_depth < 0:
        return 0
    repo = RetentionRepository(session)
    items = repo.context_summaries(archived_id, retain_depth)
    if not items:
        return 0
    # The new conversation is fresh and locked by this transaction (the
    # unique insert), so reserving ordinals here cannot race with ingest.
    _, last_ordinal = ConversationRepository(session).advance_counters(
        new_conversation_id, seq_by=0, ordinal_by=len(items)
    )
    repo.append_summary_items(tenant_id, new_conversation_id, last_ordinal - len(items) + 1, items)
    return len(items)
