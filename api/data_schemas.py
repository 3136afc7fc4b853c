"""Bodies of the data endpoints: listing conversations, importing one."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class ConversationItemOut(BaseModel):
    conversation_id: int
    session_key: str
    session_id: str | None
    archived: bool
    messages: int
    context_tokens: int
    created_at: datetime
    updated_at: datetime


class ConversationListOut(BaseModel):
    conversations: list[ConversationItemOut]
    next_cursor: str | None


class ImportOut(BaseModel):
    conversation_id: int
    messages: int
    summaries: int
    files: int
    context_items: int
    # Summary ids already used elsewhere, given new ids: old -> new.
    renamed_summaries: dict[str, str]
