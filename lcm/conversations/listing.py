"""A tenant's conversations, a page at a time, newest first.

The cursor is opaque to clients: it encodes the last conversation id of the
page, and the next page continues below it. Ids only grow, so a page never
repeats or skips a conversation that existed when paging began, whatever is
created meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from lcm import cursors
from lcm.conversations.repository import ConversationRepository

_CURSOR_PREFIX = "c1:"


@dataclass(frozen=True)
class ListedConversation:
    conversation_id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    context_tokens: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ConversationPage:
    conversations: list[ListedConversation]
    next_cursor: str | None


def encode_cursor(last_id: int) -> str:
    return cursors.encode_cursor(_CURSOR_PREFIX, last_id)


def decode_cursor(cursor: str) -> int:
    return cursors.decode_cursor(_CURSOR_PREFIX, cursor, "cursor is not one this server handed out")


def list_conversations(
    session: Session,
    tenant_id: str,
    *,
    limit: int,
    cursor: str | None = None,
    key_prefix: str | None = None,
    archived: bool | None = None,
    updated_since: datetime | None = None,
) -> ConversationPage:
    # One row more than asked tells whether another page exists.
    rows = ConversationRepository(session).page(
        tenant_id,
        before_id=decode_cursor(cursor) if cursor else None,
        limit=limit + 1,
        key_prefix=key_prefix,
        archived=archived,
        updated_since=updated_since,
    )
    listed = [
        ListedConversation(
            conversation_id=c.id,
            session_key=c.session_key,
            session_id=c.session_id,
            archived=c.archived_at is not None,
            # Seqs have no gaps and messages are only ever removed with their
            # conversation, so the last seq handed out is the message count.
            messages=c.last_seq,
            context_tokens=int(tokens),
            created_at=c.created_at,
            updated_at=c.updated_at,
        )
        for c, tokens in rows[:limit]
    ]
    more = len(rows) > limit
    return ConversationPage(listed, encode_cursor(listed[-1].conversation_id) if more else None)
