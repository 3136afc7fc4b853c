"""The host's transcript cursor: how far a host plugin has imported its own transcript.

The cursor is the host's (opaque here); ingest stores it with the batch that
brought the entries up to it (``ingest_messages(host_cursor=…)``), so it
never runs ahead of what is stored. After a restart the host reads it back
and sends only the entries after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from lcm.conversations.repository import ConversationRepository
from lcm.conversations.service import target_for_read


@dataclass(frozen=True, slots=True)
class HostCursor:
    conversation_id: int
    session_id: str | None
    host_cursor: str | None  # None: no batch of this conversation brought one


def read_host_cursor(
    session: Session, tenant_id: str, session_key: str, session_id: str | None = None
) -> HostCursor:
    """The cursor of the conversation a read targets (the family's live one by default).

    A new conversation of the family (a ``session_id`` it had not seen, or a
    reset) starts without one: its transcript is the host's new session's.
    """
    conversation = target_for_read(session, tenant_id, session_key, session_id)
    cursor = ConversationRepository(session).host_cursor(conversation.id)
    return HostCursor(conversation.id, conversation.session_id, cursor)
