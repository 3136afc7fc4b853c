"""``/new`` and ``/reset`` of a session family, as a gateway's commands mean them.

* ``new`` keeps the live conversation (same id, same history) and prunes its
  context: with ``retain_depth`` ``-1`` nothing is removed, ``0`` keeps every
  summary, ``N`` keeps only summaries of depth ``N`` or more. Raw messages
  leave the context but stay stored: grep, describe and expand still reach
  them, and summaries already covering them keep doing so.
* ``reset`` archives the live conversation and creates a fresh, empty one
  under the given ``session_id``; the archived one stays searchable through
  the family-scoped tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session

from lcm.conversations.carry_over_repository import CarryOverRepository
from lcm.conversations.repository import ConversationRepository
from lcm.conversations.service import resolve_for_write
from lcm.db.models import utcnow
from lcm.errors import Conflict, NotFound


@dataclass(frozen=True, slots=True)
class SessionReset:
    mode: Literal["new", "reset"]
    conversation_id: int
    archived_conversation_id: int | None
    context_items_removed: int


def new_session(
    session: Session, tenant_id: str, session_key: str, retain_depth: int
) -> SessionReset:
    """Prune the live conversation's context to ``retain_depth``; the caller commits."""
    repo = ConversationRepository(session)
    # The row lock orders this with ingest and with compaction commits; the
    # version bump makes a pass planned on the old context refuse to commit.
    live = repo.find_active(tenant_id, session_key, lock=True)
    if live is None:
        raise NotFound(f"no live conversation for session key {session_key!r}")
    removed = 0
    if retain_depth >= 0:
        removed = CarryOverRepository(session).prune_context(live.id, retain_depth)
        repo.advance_counters(live.id, seq_by=0, ordinal_by=0)
    return SessionReset("new", live.id, None, removed)


def reset_session(
    session: Session, tenant_id: str, session_key: str, session_id: str | None
) -> SessionReset:
    """Archive the live conversation and start an empty one; the caller commits."""
    repo = ConversationRepository(session)
    if session_id is not None and repo.find_by_session_id(tenant_id, session_key, session_id):
        raise Conflict(
            f"session id {session_id!r} already names a conversation of this family; "
            "a reset needs a new one",
            code="session_id_taken",
        )
    live = repo.find_active(tenant_id, session_key, lock=True)
    archived = None
    if live is not None:
        repo.archive(live, utcnow())
        archived = live.id
    # retain_depth -1: a reset carries nothing over.
    fresh = resolve_for_write(session, tenant_id, session_key, session_id, retain_depth=-1)
    return SessionReset("reset", fresh.id, archived, 0)
