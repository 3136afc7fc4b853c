"""Bodies of the agent-host lifecycle endpoints (turn commits, subagent forks)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from api.schemas import TurnIn
from api.validation import RequestBody, SessionIdText, Text


class CommitIn(TurnIn):
    advancement_key: Annotated[Text, Field(min_length=1, max_length=512)]


class CommitOut(BaseModel):
    conversation_id: int
    status: Literal["committed", "duplicate"]
    ingested: int
    duplicates: int
    context_tokens: int | None
    threshold_tokens: int | None
    compaction: Literal["none", "scheduled", "ran"]


class ForkIn(RequestBody):
    parent_session_key: Annotated[Text, Field(min_length=1, max_length=512)]
    parent_session_id: SessionIdText | None = None
    session_id: SessionIdText | None = None
    mode: Literal["fork", "isolated"] = "fork"
    ttl_seconds: float | None = Field(None, gt=0, le=10 * 365 * 86_400)


class ForkOut(BaseModel):
    conversation_id: int
    parent_conversation_id: int
    mode: str
    status: str
    created: bool
    summaries_shared: int
    messages_copied: int


class ForkEndIn(RequestBody):
    reason: Annotated[Text, Field(min_length=1, max_length=40)] = "completed"


class ForkEndOut(BaseModel):
    conversation_id: int
    status: str
    end_reason: str | None
