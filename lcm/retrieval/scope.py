"""Which conversations a tool call may read: a session family, one conversation, or all.

The tenant always bounds the answer. Exactly one selector is required: a
tool that silently searched everything when the caller forgot the family
would leak across the agent's own sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm.errors import InvalidInput, NotFound
from lcm.retrieval.repository import HistoryRepository
from lcm.retrieval.search_rows import Bounds


@dataclass(frozen=True, slots=True)
class ScopeSelector:
    session_key: str | None = None
    conversation_id: int | None = None
    all_conversations: bool = False

    @property
    def given(self) -> int:
        return sum(
            (self.session_key is not None, self.conversation_id is not None, self.all_conversations)
        )


def resolve_bounds(
    session: Session,
    tenant_id: str,
    selector: ScopeSelector,
    since: datetime | None = None,
    before: datetime | None = None,
) -> Bounds:
    """The tenant's conversations the selector names, as search bounds."""
    if selector.given != 1:
        raise InvalidInput(
            "give exactly one scope: session_key (the session family), conversation_id, "
            "or all_conversations: true",
            code="scope_required",
        )
    if since is not None and before is not None and since >= before:
        raise InvalidInput("since must be earlier than before")
    if selector.all_conversations:
        return Bounds(tenant_id, None, since, before)
    return Bounds(tenant_id, tuple(conversation_ids(session, tenant_id, selector)), since, before)


def conversation_ids(session: Session, tenant_id: str, selector: ScopeSelector) -> list[int]:
    """The explicit ids of a family or one conversation (404 if none is the tenant's)."""
    repo = HistoryRepository(session)
    if selector.conversation_id is not None:
        if not repo.owns_conversation(tenant_id, selector.conversation_id):
            raise NotFound(f"no conversation {selector.conversation_id}")
        return [selector.conversation_id]
    assert selector.session_key is not None
    ids = repo.family_conversation_ids(tenant_id, selector.session_key)
    if not ids:
        raise NotFound(f"no conversation for session key {selector.session_key!r}")
    return ids
