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

from sqlalchemy.orm import Session

from lcm.conversations.carry_over_repository import CarryOverRepository
from lcm.conversations.repository import ConversationRepository


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
    repo = CarryOverRepository(session)
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
